"""The command line: in-process through main(), and once as a real subprocess."""
import subprocess
import sys

from lobreplay.cli import main


def test_demo_in_process(capsys):
    assert main(["demo", "--events", "3000", "--instruments", "3", "--resting", "100", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "generated 3,000 events for 3 instruments" in out
    assert "core allocations during replay: 0" in out
    assert "every book passed validate()" in out


def test_no_verb_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "usage: lobreplay" in capsys.readouterr().err


def test_subprocess_exit_codes_and_streams():
    ok = subprocess.run([sys.executable, "-m", "lobreplay", "demo", "--events", "1000", "--instruments", "2",
                         "--resting", "50", "--repeat", "1"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "M events/s" in ok.stdout and ok.stderr == ""
    bad = subprocess.run([sys.executable, "-m", "lobreplay", "demo", "--events", "many"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert "invalid int value" in bad.stderr and "Traceback" not in bad.stderr
