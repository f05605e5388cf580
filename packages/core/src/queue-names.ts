/**
 * The names of the event queues and the Redis Cluster rules they follow: one owner, read by
 * the configuration (which refuses a prefix that would break them) and by the queue
 * (packages/core/src/queue.ts).
 */

export const EVENT_QUEUE_NAME = 'webhook-events';

/**
 * Queue names for QUEUE_SHARDS=n. One shard keeps the historical name; several are each
 * wrapped in braces, a Redis Cluster hash tag of their own (all of one queue's keys in one
 * slot, as BullMQ's Lua scripts need; different queues in different slots).
 */
export function eventQueueNames(shards: number): string[] {
  if (shards <= 1) return [EVENT_QUEUE_NAME];
  return Array.from({ length: shards }, (_, i) => `{${EVENT_QUEUE_NAME}-${i}}`);
}

/**
 * The Redis Cluster hash tag of a key: what is between its first `{` and the next `}`, when
 * that is not empty; otherwise the whole key (Redis Cluster specification, "Hash tags"). Keys
 * with the same tag live in the same slot.
 */
export function hashTagOf(key: string): string {
  const open = key.indexOf('{');
  if (open === -1) return key;
  const close = key.indexOf('}', open + 1);
  if (close === -1 || close === open + 1) return key;
  return key.slice(open + 1, close);
}

/** A BullMQ key of a queue: `<prefix>:<queue name>:<suffix>`. */
export function queueKey(prefix: string, name: string, suffix: string): string {
  return `${prefix}:${name}:${suffix}`;
}

/**
 * Why these queues cannot run on a Redis Cluster, or undefined when they can. BullMQ's scripts
 * touch several keys of one queue at once (`...:wait`, `...:active`, `...:<job id>`): they
 * must share one slot, or every script fails with CROSSSLOT. With several shards, they must
 * not all share one slot either, or one primary serves them all and sharding buys nothing.
 */
export function clusterSlotProblem(prefix: string, shards: number): string | undefined {
  const names = eventQueueNames(shards);
  const bare = prefix.replace(/[{}]/g, '');
  const tags = names.map((name) => {
    const tag = hashTagOf(queueKey(prefix, name, 'wait'));
    return tag === hashTagOf(queueKey(prefix, name, 'active')) ? tag : undefined;
  });
  if (tags.some((tag) => tag === undefined)) {
    return `"${prefix}" with QUEUE_SHARDS=${shards} spreads one queue's keys over several cluster slots, and BullMQ's scripts would fail with CROSSSLOT: wrap the prefix in braces (QUEUE_PREFIX={${bare}}) or set QUEUE_SHARDS above 1 (each shard's name is its own hash tag)`;
  }
  if (names.length > 1 && new Set(tags).size === 1) {
    return `"${prefix}" is a hash tag: all ${names.length} shards of QUEUE_SHARDS would land in one cluster slot, on one primary; drop the braces (QUEUE_PREFIX=${bare}), each shard's name is its own hash tag`;
  }
  return undefined;
}
