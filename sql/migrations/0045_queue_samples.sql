-- One row a minute for the console's charts (the queue_sample cron item,
-- workers/tasks/console-sample.ts): the queue's depth and its oldest ready
-- job's wait at that minute, and the jobs that finished in the minute before.
-- Reading an hour of charts is 60 rows, whatever the platform's throughput.
-- Kept a day (the hourly sweep).
create table queue_samples (
  at timestamptz primary key,
  ready integer not null,
  running integer not null,
  waiting integer not null,
  oldest_ready_s real,
  succeeded integer not null,
  failed integer not null
);
