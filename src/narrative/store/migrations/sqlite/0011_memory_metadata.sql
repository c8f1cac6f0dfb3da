-- Metadata on memories: a JSON object the caller gives (at most 64 keys, 16 KiB as JSON; checked before it is
-- stored), filtered on by search and lists (docs/http.md, Filters).  Memories made from a turn carry the turn's
-- own meta.  Existing memories get an empty object.
ALTER TABLE memories ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
