-- The platform's own upkeep (the cron items' tasks: the every-minute sweeps,
-- billing expiry, the sampler itself) no longer counts in a sample's ready,
-- running and waiting: on an idle service those showed load. It is counted
-- apart here: its open wake-ups at that minute. Null in samples taken before,
-- whose counts still include it (they age out within a day).
alter table queue_samples add column upkeep integer;
