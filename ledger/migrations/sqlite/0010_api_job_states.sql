-- bursar ledger, SQLite: API jobs recorded `held` whose hold has closed take the state a job
-- view gives them.
--
-- Same conventions as 0001 (STRICT tables, integer micros, epoch seconds UTC).
--
-- Until now an API job's recorded state changed when its hold expired, when it was cancelled
-- or its forwarding failed, or when a view of it noticed that its hold had settled (or been
-- released); a job nobody looked at stayed `held`. A listing by state pre-selects on the
-- recorded state plus every job recorded `held`, and wrote each one's new state back in a
-- transaction of its own: the first `GET /v1/jobs?state=` after a million unviewed
-- settlements took five minutes. Closing a hold now records its job's state in the same
-- transaction; this brings the jobs recorded before into line, as of their hold's closing.
update api_jobs
set state = (
        select case h.state
            when 'settled' then 'settled'
            when 'released' then 'cancelled'
            else 'expired'
        end
        from holds h where h.id = api_jobs.hold_id
    ),
    updated_at = (select h.closed_at from holds h where h.id = api_jobs.hold_id)
where state = 'held'
  and hold_id in (select id from holds where state in ('settled', 'released', 'expired'));
