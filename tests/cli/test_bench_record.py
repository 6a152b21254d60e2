"""``geomlin bench --record`` pastes each requested run's output verbatim, once per command."""


from geomlin.cli.main import main

SCRIPT = """
import sys, pathlib
counter = pathlib.Path(__file__).with_name("calls.txt")
counter.write_text(counter.read_text() + "x" if counter.exists() else "x")
print("| n | args |")
print("|---|---|")
print("| 1 | " + " ".join(sys.argv[1:]) + " |")
"""


def _setup(tmp_path, body="old table"):
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    (bench / "bench_toy.py").write_text(SCRIPT)
    (bench / "bench_fail.py").write_text("raise SystemExit(3)\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    page = docs / "page.md"
    page.write_text(f"# Page\n\n<!-- bench: bench_toy.py --quick -->\n{body}\n<!-- /bench -->\n\nafter\n"
                    f"<!-- bench: bench_toy.py --quick -->\n<!-- /bench -->\n")
    return bench, docs, page


def test_record_replaces_blocks_with_one_run(tmp_path):
    bench, docs, page = _setup(tmp_path)
    assert main(["bench", "--record", "--dir", str(bench), "--docs", str(docs)]) == 0
    text = page.read_text()
    assert "old table" not in text
    assert text.count("| 1 | --quick |") == 2          # both blocks, same output
    assert (bench / "calls.txt").read_text() == "x"    # one run for the two blocks
    assert text.endswith("<!-- /bench -->\n") and "after" in text


def test_record_keeps_blocks_of_failed_runs(tmp_path, capsys):
    bench, docs, page = _setup(tmp_path)
    page.write_text("<!-- bench: bench_fail.py -->\nkept\n<!-- /bench -->\n")
    assert main(["bench", "--record", "--dir", str(bench), "--docs", str(docs)]) == 1
    assert "kept" in page.read_text()
    assert "failed: bench_fail.py (exit 3)" in capsys.readouterr().err


def test_record_refuses_unknown_scripts(tmp_path, capsys):
    bench, docs, page = _setup(tmp_path)
    page.write_text("<!-- bench: bench_nope.py -->\n<!-- /bench -->\n")
    assert main(["bench", "--record", "--dir", str(bench), "--docs", str(docs)]) == 2
    assert "bench_nope.py" in capsys.readouterr().err


def test_record_fills_the_readme_next_to_the_docs(tmp_path):
    bench, docs, _page = _setup(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text("# Project\n<!-- bench: bench_toy.py --full -->\nstale\n<!-- /bench -->\n")
    assert main(["bench", "--record", "--dir", str(bench), "--docs", str(docs)]) == 0
    assert "| 1 | --full |" in readme.read_text() and "stale" not in readme.read_text()


def test_record_only_one_block_by_its_command(tmp_path, capsys):
    bench, docs, page = _setup(tmp_path)
    page.write_text("<!-- bench: bench_toy.py --a -->\nold a\n<!-- /bench -->\n"
                    "<!-- bench: bench_toy.py --b -->\nold b\n<!-- /bench -->\n")
    assert main(["bench", "--record", "--dir", str(bench), "--docs", str(docs), "--only", "bench_toy.py --b"]) == 0
    text = page.read_text()
    assert "old a" in text and "| 1 | --b |" in text and "old b" not in text
    assert (bench / "calls.txt").read_text() == "x"
    page.write_text(page.read_text() + "<!-- bench: bench_toy.py -->\nold bare\n<!-- /bench -->\n")
    assert main(["bench", "--record", "--dir", str(bench), "--docs", str(docs), "--only", "bench_toy.py"]) == 0
    assert "old a" in page.read_text() and "old bare" not in page.read_text()    # the bare block alone
    assert main(["bench", "--record", "--dir", str(bench), "--docs", str(docs), "--only", "bench_toy"]) == 0
    assert "old a" not in page.read_text()                                        # every block of the script
    assert main(["bench", "--record", "--dir", str(bench), "--docs", str(docs), "--only", "bench_toy.py --c"]) == 2
    assert "no docs block runs 'bench_toy.py --c'" in capsys.readouterr().err
    assert main(["bench", "--record", "--dir", str(bench), "--docs", str(docs), "--only", "bench_toy.py 'a"]) == 2
    assert "--only \"bench_toy.py 'a\": cannot parse it" in capsys.readouterr().err


import pytest

MALFORMED = [
    ("missing closing marker", "<!-- bench: bench_toy.py -->\ntable\n\nrest of the page\n", 1, "no closing marker"),
    ("second opener inside a block", "<!-- bench: bench_toy.py -->\n<!-- bench: bench_toy.py -->\n<!-- /bench -->\n",
     2, "starts inside the block opened at line 1"),
    ("mistyped opener", "<!-- bench:bench_toy.py -->\nt\n<!-- /bench -->\n", 1, "mistyped bench marker"),
    ("mistyped closer", "<!-- bench: bench_toy.py -->\nt\n<!-- / bench -->\n", 3, "mistyped bench marker"),
    ("stray closer", "text\n<!-- /bench -->\n", 2, "without a <!-- bench"),
    ("unbalanced quote", "<!-- bench: bench_toy.py --name 'a b -->\nt\n<!-- /bench -->\n", 1, "cannot parse"),
    ("empty command", "<!-- bench:  -->\nt\n<!-- /bench -->\n", 1, "empty bench command"),
]


@pytest.mark.parametrize("case,text,line,msg", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_blocks_are_refused_before_anything_runs(tmp_path, capsys, case, text, line, msg):
    bench, docs, page = _setup(tmp_path)
    good = page.read_text()
    bad = docs / "bad.md"
    bad.write_text(text)
    assert main(["bench", "--record", "--dir", str(bench), "--docs", str(docs)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{bad}:{line}:" in err[0] and msg in err[0], err
    assert bad.read_text() == text and page.read_text() == good       # no page touched
    assert not (bench / "calls.txt").exists()                          # nothing ran
    assert sorted(p.name for p in docs.iterdir()) == ["bad.md", "page.md"]
