-- A session's "queued" job events come from the jobs rows themselves (a job
-- of a session is queued when its row is created: created_at, kind, tenant),
-- so enqueuing no longer writes a session_job_events row with three indexes
-- and three foreign-key checks for each job: on a chat send that row was the
-- largest part of the statement (measured). core/activity/sessions.ts reads
-- them from jobs. Later events (started, progress, a retry's queued, the end)
-- are still recorded by the update trigger.
drop trigger jobs_session_event_insert on jobs;
delete from session_job_events where event = 'queued' and attempt = 0;
