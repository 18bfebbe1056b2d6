"""``giod rule add --tier``, ``giod tier``, ``giod stage``, ``giod release`` and ``giod show`` on a nearline site."""

from __future__ import annotations

from click.testing import CliRunner, Result

from giod.cli import main
from tests.tape.conftest import tape_url


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_the_nearline_tier_from_the_command_line(fed, tmp_path):
    f = str(fed.root)
    for bad in ("unread_s=soon", "unread_s=-1"):  # the library's settings are checked where the site is added
        r = run("site", "add", "vault", tape_url(tmp_path / "vault") + "&" + bad, "-f", f)
        assert r.exit_code == 2 and "unread_s" in r.output and len(r.output.strip().splitlines()) == 1, r.output
    r = run("site", "add", "vault", tape_url(tmp_path / "vault", unread_s=7 * 86400), "-f", f)
    assert r.exit_code == 0, r.output
    assert run("rule", "add", "qcd", "--tier", "nearline", "--sites", "local", "-f", f).exit_code == 2
    bad = run("rule", "add", "qcd", "--tier", "nearline", "--sites", "vault", "--older-than", "soon", "-f", f)
    assert bad.exit_code == 2 and "--older-than" in bad.output
    r = run("rule", "add", "qcd", "--tier", "nearline", "--sites", "vault", "--older-than", "0", "-f", f)
    assert r.exit_code == 0 and "tier rule 1" in r.output, r.output
    assert "vault" in run("rule", "ls", "-f", f).output
    r = run("tier", "apply", "-f", f)
    assert r.exit_code == 0 and "80 disk replicas dropped" in r.output, r.output
    for path in fed.store.site("vault").library.paths():
        fed.store.site("vault").library.evict(path)
    shown = run("show", "qcd", "-f", f).output
    assert "vault (nearline): 80 files on tape only" in shown, shown
    r = run("stage", "qcd", "--select", "njets >= 3", "--columns", "jets", "--request", "job1", "--pin", "2h",
            "--wait", "-f", f)
    assert r.exit_code == 0 and "request job1 at site vault" in r.output and "on disk" in r.output, r.output
    assert "staged" in run("tier", "status", "qcd", "-f", f).output
    assert "pins ended" in run("release", "job1", "-f", f).output
    missing = run("release", "job1", "-f", f)
    assert missing.exit_code == 2 and "no stage request job1" in missing.output
