-- Vectors join the memory change log: the in-process vector index follows the
-- same log as the keyword index, so every connection sees every committed
-- vector (its own and other processes') before it answers a search.
CREATE TRIGGER memory_changes_vector_ai AFTER INSERT ON memory_vectors BEGIN
    INSERT INTO memory_changes(memory_id) VALUES (new.memory_id);
END;
CREATE TRIGGER memory_changes_vector_ad AFTER DELETE ON memory_vectors BEGIN
    INSERT INTO memory_changes(memory_id) VALUES (old.memory_id);
END;
CREATE TRIGGER memory_changes_vector_au AFTER UPDATE ON memory_vectors BEGIN
    INSERT INTO memory_changes(memory_id) VALUES (new.memory_id);
END;
-- The log stays short by itself: every 1,000th entry drops all but the newest 5,000.  An index
-- further behind than that sees the gap and rebuilds from the file, so nothing is lost.
CREATE TRIGGER memory_changes_prune AFTER INSERT ON memory_changes WHEN new.seq % 1000 = 0 BEGIN
    DELETE FROM memory_changes WHERE seq <= new.seq - 5000;
END;
