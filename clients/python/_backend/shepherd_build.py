"""A minimal PEP 517 build backend for shepherd-client, standard library only, so the package builds offline
under pip's build isolation (no setuptools or wheel to download).

Builds a pure-Python wheel (py3-none-any) holding the `shepherd_client` package and the top-level
`shepherd_worker` module, and an sdist of the source tree. Name and version come from pyproject.toml's
[project] table (read with tomllib where available, else a small parser of the two keys).
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ["shepherd_client"]
MODULES = ["shepherd_worker.py"]


def _project():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        raw = f.read()
    try:
        import tomllib

        p = tomllib.loads(raw.decode())["project"]
        return p["name"], p["version"], p.get("description", ""), p.get("requires-python", "")
    except ImportError:  # Python < 3.11
        text = raw.decode()
        section = text.split("[project]", 1)[1].split("\n[", 1)[0]

        def key(k):
            m = re.search(r'^%s\s*=\s*"([^"]*)"' % re.escape(k), section, re.M)
            return m.group(1) if m else ""

        return key("name"), key("version"), key("description"), key("requires-python")


def _dist_name(name):
    return re.sub(r"[-_.]+", "_", name).lower()


def _files():
    out = []
    for pkg in PACKAGES:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, pkg)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for fn in sorted(filenames):
                if fn.endswith(".py"):
                    full = os.path.join(dirpath, fn)
                    out.append((os.path.relpath(full, ROOT).replace(os.sep, "/"), full))
    for m in MODULES:
        out.append((m, os.path.join(ROOT, m)))
    return out


def _metadata():
    name, version, summary, requires_python = _project()
    lines = ["Metadata-Version: 2.1", "Name: " + name, "Version: " + version, "Summary: " + summary]
    if requires_python:
        lines.append("Requires-Python: " + requires_python)
    return name, version, "\n".join(lines) + "\n"


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def _dist_info(metadata_directory_parent=None):
    name, version, meta = _metadata()
    info = "%s-%s.dist-info" % (_dist_name(name), version)
    files = {
        info + "/METADATA": meta.encode(),
        info + "/WHEEL": b"Wheel-Version: 1.0\nGenerator: shepherd_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        info + "/entry_points.txt": b"[console_scripts]\nshepherd-run = shepherd_client.run:main\n",
        info + "/top_level.txt": b"shepherd_client\nshepherd_worker\n",
    }
    return name, version, info, files


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _, _, info, files = _dist_info()
    for path, data in files.items():
        full = os.path.join(metadata_directory, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
    return info


def _write_wheel(wheel_directory, contents):
    name, version, info, files = _dist_info()
    wheel_name = "%s-%s-py3-none-any.whl" % (_dist_name(name), version)
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in list(contents) + sorted(files.items()):
            z.writestr(zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0)), data)
            record.append(_record_line(arc, data))
        record.append(info + "/RECORD,,")
        z.writestr(zipfile.ZipInfo(info + "/RECORD", date_time=(2020, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
    return wheel_name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    contents = []
    for arc, full in _files():
        with open(full, "rb") as f:
            contents.append((arc, f.read()))
    return _write_wheel(wheel_directory, contents)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    name, _, _ = _metadata()
    return _write_wheel(wheel_directory, [("__editable___%s.pth" % _dist_name(name), (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    name, version, meta = _metadata()
    base = "%s-%s" % (_dist_name(name), version)
    path = os.path.join(sdist_directory, base + ".tar.gz")
    with tarfile.open(path, "w:gz") as tar:
        entries = [(arc, full) for arc, full in _files()]
        for extra in ("pyproject.toml", "README.md", "_backend/shepherd_build.py"):
            entries.append((extra, os.path.join(ROOT, extra)))
        for arc, full in entries:
            tar.add(full, arcname=base + "/" + arc, recursive=False)
        info = tarfile.TarInfo(base + "/PKG-INFO")
        data = meta.encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return base + ".tar.gz"
