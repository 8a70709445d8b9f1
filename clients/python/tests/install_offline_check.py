"""`pip install ./clients/python` offline with pip's default build isolation, and the installed package
reports without torch. Run by ctest as python_client_install_offline (not part of the unittest discovery:
it runs pip). PIP_NO_INDEX and an unroutable proxy make any download attempt fail."""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

from fake_server import FakeDaemon

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class InstallOfflineTest(unittest.TestCase):
    def test_pip_install_without_an_index_then_report_without_torch(self):
        target = tempfile.mkdtemp(prefix="shepherd-pip-")
        fake = FakeDaemon()
        try:
            env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                       HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")
            env.pop("PYTHONPATH", None)
            out = subprocess.run([sys.executable, "-m", "pip", "install", "--no-cache-dir", "--target", target, SRC],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
            self.assertEqual(out.returncode, 0, out.stdout.decode())
            self.assertTrue(os.path.isfile(os.path.join(target, "shepherd_client", "instrument.py")))
            self.assertTrue(os.path.isfile(os.path.join(target, "shepherd_worker.py")))
            script = textwrap.dedent("""
                import sys
                sys.modules["torch"] = None  # any import of torch now fails
                import shepherd_client
                assert shepherd_client.__file__.startswith(sys.argv[1]), shepherd_client.__file__
                c = shepherd_client.ShepherdClient.from_env()
                c.step(1, loss=0.5, grad_norm=1.0, step_time_s=0.1)
                c.checkpoint_saved(1, "/ckpt/1.pt", replicated=True)
                c.close()
            """)
            run_env = dict(os.environ, PYTHONPATH=target, SHEPHERD_URL=fake.url, SHEPHERD_JOB="job-p")
            r = subprocess.run([sys.executable, "-c", script, target], env=run_env, cwd=target,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout.decode())
            self.assertEqual([x["step"] for x in fake.reports("step")], [1])
            self.assertEqual(fake.reports("checkpoint")[0]["scope"], "replicated")
        finally:
            fake.close()
            shutil.rmtree(target, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
