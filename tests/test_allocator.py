import os
import subprocess
import sys

import pytest

from seed.allocator import chosen_allocator, find_tcmalloc, preload_environment

LIB = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
needs_tcmalloc = pytest.mark.skipif(
    find_tcmalloc() is None or not sys.platform.startswith("linux"),
    reason="tcmalloc is not installed (scripts/setup.sh installs libtcmalloc-minimal4 where it can)",
)


def _env_without_preload(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "SEED_ALLOCATOR")}
    return {**env, **extra}


def test_preload_is_added_once_and_keeps_the_users_preloads():
    env = preload_environment({"PATH": "/bin", "LD_PRELOAD": "/opt/mine.so"}, LIB)
    assert env is not None and env["LD_PRELOAD"] == f"{LIB} /opt/mine.so" and env["PATH"] == "/bin"
    assert env["TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD"] == str(1 << 40)
    assert preload_environment(env, LIB) is None  # the re-executed process does not re-execute again
    assert preload_environment({"LD_PRELOAD": f"/opt/mine.so:{LIB}"}, LIB) is None


def test_nothing_to_do_without_the_library_or_when_the_user_opts_out():
    assert preload_environment({}, None) is None
    assert preload_environment({"SEED_ALLOCATOR": "system"}, LIB) is None
    assert (
        preload_environment({"TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD": "5"}, LIB)[
            "TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD"
        ]
        == "5"
    )  # the user's own setting wins


def test_an_unknown_allocator_is_refused_with_the_allowed_values():
    assert chosen_allocator({"SEED_ALLOCATOR": " System "}) == "system"
    with pytest.raises(SystemExit, match="SEED_ALLOCATOR='jemalloc' is not one of tcmalloc, system"):
        chosen_allocator({"SEED_ALLOCATOR": "jemalloc"})


def test_find_tcmalloc_looks_in_the_given_directories(tmp_path):
    assert find_tcmalloc([str(tmp_path)]) in (None, find_tcmalloc())  # only the ldconfig fallback can answer
    (tmp_path / "libtcmalloc_minimal.so.4").write_bytes(b"")
    assert find_tcmalloc([str(tmp_path)]) == str(tmp_path / "libtcmalloc_minimal.so.4")


def _mapped_libraries(allocator: str) -> str:
    """The shared objects mapped into a process that re-executed itself through seed.allocator."""
    env = _env_without_preload(SEED_ALLOCATOR=allocator)
    code = (
        "import sys; from seed.allocator import reexec_under_tcmalloc; "
        "reexec_under_tcmalloc([sys.executable, '-c', 'print(open(\"/proc/self/maps\").read())']); "
        "print(open('/proc/self/maps').read())"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@needs_tcmalloc
def test_the_reexecuted_process_runs_under_tcmalloc_unless_opted_out():
    assert "libtcmalloc" in _mapped_libraries("tcmalloc")
    assert "libtcmalloc" not in _mapped_libraries("system")


@needs_tcmalloc
def test_the_console_entry_keeps_arguments_and_exit_code_across_the_reexecution():
    env = _env_without_preload()
    proc = subprocess.run(
        [sys.executable, "-m", "seed.cli", "envs"], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and "sokoban" in proc.stdout, proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "seed.cli", "play", "no-such-env"], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and "unknown env 'no-such-env'; available: alfworld, ezpoints" in proc.stderr
    assert "Traceback" not in proc.stderr
