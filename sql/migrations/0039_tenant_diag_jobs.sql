-- A tenant Admin may start diagnostic jobs with small bounds; how many of an
-- account's are unfinished is counted per request (core/jobs/diagnostics.ts).
create index jobs_open_diag_idx on jobs (tenant_id) where status in ('queued', 'running') and kind like 'diag.%';
