-- bursar ledger, SQLite: the pending rest of a cancelled job array, kept by name.
--
-- Same conventions as 0001 (STRICT tables, integer micros, epoch seconds UTC).
--
-- slurmdbd may log an array's pending rest (`63_[1-3%1]`) still naming a task that started
-- just before the array was cancelled: that task ran, and ends with a record of its own. The
-- rest's display id is kept here once its record ends, so that `array_never_ran` (0016) counts
-- only the tasks it names that have no record of their own, counted again whenever one comes.
alter table api_jobs add column array_rest text;
