#!/usr/bin/env python3
"""Run SQL files against chDB, the embedded current ClickHouse, statement by statement.

slicemeter's SQL must run on ClickHouse 18.16 (Debian's server, used by the tests) and on current
ClickHouse; this checks the second. Usage: chdb_check.py FILE.sql... All files run in order in
one temporary session, so a later file may use tables an earlier one created. A statement ends
with ';' at the end of a line (not of a comment line); comment-only lines between statements
are skipped.

Exit status: 0 all statements ran, 1 a statement failed, 2 bad usage or unreadable file,
3 the chdb module is missing (pip install chdb).
"""

import re
import shutil
import sys
import tempfile

MISSING = 3


def statements(text):
    """Yields (line number, statement) for each ';'-terminated statement in text."""
    buf, start = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if start is None:
            if not line.strip() or line.strip().startswith("--"):
                continue
            start = number
        buf.append(line)
        if line.rstrip().endswith(";") and not line.strip().startswith("--"):
            yield start, "\n".join(buf).rstrip().rstrip(";").strip()
            buf, start = [], None
    rest = "\n".join(buf).strip()
    if rest and not all(not l.strip() or l.strip().startswith("--") for l in buf):
        yield start, rest


def main(paths):
    if not paths:
        print("usage: chdb_check.py FILE.sql...", file=sys.stderr)
        return 2
    try:
        from chdb import session
    except ImportError as e:
        print(f"chdb_check: cannot import chdb ({e}); install it with `pip install chdb`",
              file=sys.stderr)
        return MISSING

    work = tempfile.mkdtemp(prefix="slicemeter-chdb-")
    sess = session.Session(work)
    try:
        version = str(sess.query("SELECT version()", "CSV")).strip().strip('"')
        count = 0
        for path in paths:
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                print(f"chdb: {path}: {e}", file=sys.stderr)
                return 2
            for line, sql in statements(text):
                try:
                    sess.query(sql)
                except Exception as e:  # chdb raises ChdbError (a RuntimeError) for SQL errors
                    first = re.sub(r"\s+", " ", str(e)).strip()[:2000]
                    print(f"chdb: {path}:{line}: statement failed on ClickHouse {version}: {first}\n"
                          f"--- statement ---\n{sql}", file=sys.stderr)
                    return 1
                count += 1
        print(f"chdb: {count} statements OK on ClickHouse {version}")
        return 0
    finally:
        sess.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
