"""Ctrl-C stops a long search within a second: KeyboardInterrupt, and the interpreter lives on."""
import os
import signal
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import os, signal, threading, time
    import heddle
    m = heddle.load("gpt3-175b")
    fired = []
    def interrupt():
        fired.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)
    threading.Timer(1.5, interrupt).start()
    try:
        heddle.plan(m, "a100x4096", train=True, batch=4096, max_devices=4096, time_limit=120)
        print("finished")
    except KeyboardInterrupt:
        print("interrupted after %.3f s" % (time.monotonic() - fired[0]))
        # the interpreter and the module still work
        print("after", heddle.load("gpt-tiny").ops > 0)
    """
)


def test_ctrl_c_interrupts_a_search_within_a_second():
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("interrupted after"), r.stdout
    assert float(lines[0].split()[2]) < 1.0
    assert "after True" in r.stdout
