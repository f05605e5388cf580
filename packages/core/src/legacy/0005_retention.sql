-- 0005: retention. Done events older than their provider's horizon are deleted in small
-- batches (apps/worker/src/retention.ts). This partial index makes each batch an index range
-- scan of one provider's oldest done rows: its cost depends on the batch size, not on the
-- size of the table.
create index webhook_events_done_retention_idx on webhook_events (provider, received_at) where state = 'done';
