-- The messages the admin writes itself (a run lost, a fire skipped, an executor's refusal), kept
-- beside their English text as a code and its values (JSON, `admin/src/note.rs`) so that the
-- console can say them in its own language. NULL where the message is not the admin's own.
ALTER TABLE fires ADD COLUMN message_note TEXT;
ALTER TABLE runs ADD COLUMN trigger_note TEXT;
ALTER TABLE runs ADD COLUMN handle_note TEXT;
