-- migrations/0001_refunds.sql
-- Your tables, in your schema: Oncehook keeps its own in the schema `oncehook`.
create table refunds (
  charge_id text primary key,
  amount_refunded integer not null,
  notification text
);
