-- The W3C traceparent of the span that appended a delivery's event, when tracing was on (issue 34): the
-- delivery's attempts are traced under it, and the webhook carries that trace to its receiver. NULL when
-- tracing was off, and for deliveries queued before this migration.
ALTER TABLE webhook_deliveries ADD COLUMN trace_parent text;
