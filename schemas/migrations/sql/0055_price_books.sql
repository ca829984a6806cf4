-- The price books the attribution service has started with (attribution/service): one row each
-- time it starts with a book other than the latest recorded (hash: SHA-256 of book, the book's
-- canonical JSON, pricebook.Canonical; first_seen_ns: when it started with it), and one more
-- for each step of the re-attribution that the change makes: the stored minutes of
-- [reprice_from_ns, reprice_to_ns) are attributed again with the new book, and
-- reprice_next_ns is how far that has come (done once it reaches reprice_to_ns; all three 0:
-- nothing to do). The latest row (first_seen_ns, then updated_ns) is the state: a restart
-- resumes from it.
CREATE TABLE IF NOT EXISTS price_books (
    hash String,
    first_seen_ns UInt64,
    book String,
    reprice_from_ns Int64,
    reprice_to_ns Int64,
    reprice_next_ns Int64,
    reason String,
    updated_ns UInt64
) ENGINE = MergeTree()
ORDER BY (first_seen_ns, hash, updated_ns)
