CREATE TABLE bad_check (a UInt8) ENGINE = MergeTree() ORDER BY a;
SELECT no_such_column FROM bad_check;
