/**
 * The one replace that may carry tool calls (SPEC §15): an `assistant/message` whose oversized
 * tool-call arguments were shortened, positionally replacing exactly that message.
 *
 * Like the tool-result prune (which shadows exactly one tool/result and changes only its
 * content), it changes nothing a provider pairs on, so tool balance is untouched. Precisely,
 * against the one assistant/message it shadows, the replacement:
 * - has the same provider, model, usage and finishReason (absent stays absent);
 * - has the same content blocks, same count, same types, same order;
 * - keeps every text and reasoning block byte-identical;
 * - keeps every tool call's id and name; its `arguments` are byte-identical, or both the old
 *   and the new arguments are JSON and the new value is the old one with some string values
 *   (never keys) replaced by strings no longer than they were: same keys in the same order,
 *   same array lengths, same numbers, booleans and nulls. Arguments that were not JSON stay
 *   byte-identical.
 *
 * Both functions are pure: the session applies `argumentPruneProblem` as its rule, and a pruner
 * uses `withPrunedArguments` to build the event (and can check it first with `Session.check`).
 */
import type { AppendInput, EventData, SessionEvent } from './events';

type AssistantData = EventData<'assistant/message'>;

const ROOT = 'arguments';

function sameUsage(a: AssistantData['usage'], b: AssistantData['usage']): boolean {
  if (a === undefined || b === undefined) return a === b;
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) if (a[k as keyof typeof a] !== b[k as keyof typeof b]) return false;
  return true;
}

/** Where `after` is not `before` with only string values shortened, or undefined when it is. */
function jsonShapeProblem(before: unknown, after: unknown, path: string): string | undefined {
  if (typeof before === 'string') {
    if (typeof after !== 'string') return `${path} was a string`;
    return after.length <= before.length ? undefined : `${path} grew from ${before.length} to ${after.length} characters`;
  }
  if (before === null || typeof before !== 'object') {
    return after === before ? undefined : `${path} changed from ${JSON.stringify(before)} (only string values may be shortened)`;
  }
  if (Array.isArray(before)) {
    if (!Array.isArray(after)) return `${path} was an array`;
    if (after.length !== before.length) return `${path} had ${before.length} items, now ${after.length}`;
    for (let i = 0; i < before.length; i++) {
      const p = jsonShapeProblem(before[i], after[i], `${path}[${i}]`);
      if (p) return p;
    }
    return undefined;
  }
  if (after === null || typeof after !== 'object' || Array.isArray(after)) return `${path} was an object`;
  const bk = Object.keys(before);
  const ak = Object.keys(after);
  if (bk.length !== ak.length || bk.some((k, i) => ak[i] !== k)) {
    return `${path} had keys ${JSON.stringify(bk)}, now ${JSON.stringify(ak)}`;
  }
  for (const k of bk) {
    const p = jsonShapeProblem((before as Record<string, unknown>)[k], (after as Record<string, unknown>)[k], `${path}.${k}`);
    if (p) return p;
  }
  return undefined;
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false };
  }
}

/**
 * Why `after` is not an argument prune of `before`, or undefined when it is one. Cost: linear
 * in the size of the two messages.
 */
export function argumentPruneProblem(before: Readonly<AssistantData>, after: Readonly<AssistantData>): string | undefined {
  for (const field of ['provider', 'model', 'finishReason'] as const) {
    if (before[field] !== after[field]) return `${field} must stay ${JSON.stringify(before[field])}`;
  }
  if (!sameUsage(before.usage, after.usage)) return 'usage must stay as recorded';
  if (before.content.length !== after.content.length) {
    return `content must keep its ${before.content.length} blocks (got ${after.content.length})`;
  }
  for (let i = 0; i < before.content.length; i++) {
    const b = before.content[i]!;
    const a = after.content[i]!;
    if (a.type !== b.type) return `content[${i}] must stay a ${b.type} block`;
    // A thought or thinking signature the provider checks must survive a prune byte for byte.
    if (JSON.stringify(a.providerOptions) !== JSON.stringify(b.providerOptions)) return `content[${i}] must keep its providerOptions`;
    if (b.type !== 'tool-call') {
      if ((a as typeof b).text !== b.text) return `content[${i}] (${b.type}) must stay unchanged: only tool-call arguments may be pruned`;
      continue;
    }
    const call = a as typeof b;
    if (call.id !== b.id || call.name !== b.name) {
      return `content[${i}] must stay tool call "${b.id}" (${b.name}), got "${call.id}" (${call.name})`;
    }
    if (call.arguments === b.arguments) continue;
    const old = parseJson(b.arguments);
    if (!old.ok) return `call "${b.id}": its arguments are not JSON, so they must stay byte-identical`;
    const next = parseJson(call.arguments);
    if (!next.ok) return `call "${b.id}": the pruned arguments must be valid JSON`;
    let problem: string | undefined;
    try {
      problem = jsonShapeProblem(old.value, next.value, ROOT);
    } catch (err) {
      if (!(err instanceof RangeError)) throw err;
      problem = 'the arguments nest too deeply to compare';
    }
    if (problem) return `call "${b.id}": ${problem}; a prune may only shorten string values`;
  }
  return undefined;
}

/**
 * The replace that records pruned arguments for `original` (a current assistant/message):
 * `args` maps a call id to its new arguments (calls not named keep theirs). `pruneSeq` is the
 * `compaction/prune` event logged for it, named in the provenance after the original.
 */
export function withPrunedArguments(
  original: SessionEvent<'assistant/message'>,
  args: Readonly<Record<string, string>> | ReadonlyMap<string, string>,
  pruneSeq?: number,
): AppendInput<'assistant/message'> {
  const lookup = (id: string): string | undefined =>
    args instanceof Map ? args.get(id) : Object.hasOwn(args, id) ? (args as Record<string, string>)[id] : undefined;
  const content = original.data.content.map((b) => {
    if (b.type !== 'tool-call') return { ...b };
    const next = lookup(b.id);
    return next === undefined ? { ...b } : { ...b, arguments: next };
  });
  const data: AssistantData = { ...original.data, content };
  if (original.data.usage) data.usage = { ...original.data.usage };
  return {
    type: 'assistant/message',
    data,
    surfaceOp: { op: 'replace', start: original.seq, end: original.seq },
    sourceEventSeqs: pruneSeq === undefined ? [original.seq] : [original.seq, pruneSeq],
  };
}
