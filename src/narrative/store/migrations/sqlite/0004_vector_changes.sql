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
