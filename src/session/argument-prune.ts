/**
 * The one replace that may carry tool calls (docs/spec.md#15-pruning-what-the-agent-wrote): an `assistant/message` whose oversized
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
 *   (never keys) replaced by strings no longer than they were: every other token (keys,
 *   numbers as written, booleans, nulls, brackets) byte-identical, whitespace between tokens
 *   aside, so the same keys in the same order and the same array lengths. Arguments that were
 *   not JSON stay byte-identical.
 *
 * Both functions are pure: the session applies `argumentPruneProblem` as its rule, and a pruner
 * uses `withPrunedArguments` to build the event (and can check it first with `Session.check`).
 */
import type { AppendInput, EventData, SessionEvent } from './events';
import { jsonTokens } from './json-tokens';

type AssistantData = EventData<'assistant/message'>;

const ROOT = 'arguments';

function sameUsage(a: AssistantData['usage'], b: AssistantData['usage']): boolean {
  if (a === undefined || b === undefined) return a === b;
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) if (a[k as keyof typeof a] !== b[k as keyof typeof b]) return false;
  return true;
}

type Segment = { key: string | undefined } | { index: number };

/** `arguments.a[0].b`; the middle elided when the nesting is deep. */
function pathOf(stack: readonly Segment[]): string {
  const part = (s: Segment) => ('index' in s ? `[${s.index}]` : s.key === undefined ? '' : `.${s.key}`);
  const parts = stack.length > 20 ? [...stack.slice(0, 10).map(part), `…(${stack.length - 20} levels)…`, ...stack.slice(-10).map(part)] : stack.map(part);
  return ROOT + parts.join('');
}

/**
 * Where `after` is not `before` with only string values shortened, or undefined when it is.
 * Both are valid JSON texts. Compared token by token (whitespace aside): keys, numbers,
 * booleans, nulls and punctuation byte-for-byte, so a number rewritten (`1.50` as `1.5`, an
 * integer above 2^53 rounded) or a key lost is refused; string values by decoded length.
 */
function jsonShapeProblem(before: string, after: string): string | undefined {
  const stack: Segment[] = [];
  const a = jsonTokens(after);
  for (const b of jsonTokens(before)) {
    const t = a.next();
    const bText = before.slice(b.start, b.end);
    if (t.done) return `${pathOf(stack)} ends early: ${JSON.stringify(bText)} is missing`;
    const aText = after.slice(t.value.start, t.value.end);
    if (b.kind === 'string') {
      if (t.value.kind !== 'string') return `${pathOf(stack)} was a string`;
      if (aText !== bText) {
        const was = (JSON.parse(bText) as string).length;
        const now = (JSON.parse(aText) as string).length;
        if (now > was) return `${pathOf(stack)} grew from ${was} to ${now} characters`;
      }
      continue;
    }
    if (aText !== bText) {
      if (b.kind === 'key') return `${pathOf(stack)} had key ${bText}, now ${aText}: the keys must stay`;
      if (bText === '{') return `${pathOf(stack)} was an object`;
      if (bText === '[') return `${pathOf(stack)} was an array`;
      if (bText === ',' || bText === '}' || bText === ']') {
        const top = stack[stack.length - 1];
        return top !== undefined && 'index' in top
          ? `${pathOf(stack.slice(0, -1))} must keep its number of items`
          : `${pathOf(stack.slice(0, -1))} must keep its keys`;
      }
      return `${pathOf(stack)} changed from ${bText} (only string values may be shortened)`;
    }
    if (b.kind === 'key') stack[stack.length - 1] = { key: JSON.parse(bText) as string };
    else if (bText === '{') stack.push({ key: undefined });
    else if (bText === '[') stack.push({ index: 0 });
    else if (bText === '}' || bText === ']') stack.pop();
    else if (bText === ',') {
      const top = stack[stack.length - 1];
      if (top !== undefined && 'index' in top) stack[stack.length - 1] = { index: top.index + 1 };
    }
  }
  return a.next().done ? undefined : `${ROOT} has more after its end`;
}

/** Whether the text parses as JSON (the only argument strings a prune may rewrite). */
export function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
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
    if (!isJson(b.arguments)) return `call "${b.id}": its arguments are not JSON, so they must stay byte-identical`;
    if (!isJson(call.arguments)) return `call "${b.id}": the pruned arguments must be valid JSON`;
    const problem = jsonShapeProblem(b.arguments, call.arguments);
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
