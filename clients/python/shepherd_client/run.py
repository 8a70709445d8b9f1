"""Zero-code mode: run an unmodified training script with Shepherd's instrumentation.

    python3 -m shepherd_client.run script.py [args...]
    python3 -m shepherd_client.run -m package.module [args...]

Installs the instrumentation (shepherd_client.install()), then runs the script as __main__ with
sys.argv = [script, args...], as `python3 script.py args...` would. Outside Shepherd (SHEPHERD_URL unset)
it only runs the script. When the script returns or exits with status 0, the rank reports `finished`
(ShepherdClient.finished): its silence afterwards is not a lost rank. An exception or another status
sends nothing more.
"""

import runpy
import sys


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if argv else 2)
    from .instrument import install

    client = install()
    if argv[0] == "-m" and len(argv) < 2:
        sys.exit("shepherd_client.run: -m needs a module name")
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1]] + argv[2:]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            import os

            sys.argv = argv
            sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        if e.code is None or e.code == 0:
            client.finished()
        raise
    client.finished()


if __name__ == "__main__":
    main()
