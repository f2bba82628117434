/**
 * ai-tokenizer behind the tokenizer interface (docs/measured.md): o200k_base and cl100k_base count with
 * ai-tokenizer when it is installed and with gpt-tokenizer otherwise, so the two must give the
 * same count for every text. Checked on the transcripts in test/fixtures (every string of every
 * record, and every whole line), the project's own code and docs, digit-heavy text, CJK text and
 * random Unicode; any one text counted differently fails the test with the text named.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createGptTokenizer, getTokenizer, loadAiCounter, type GptEncodingName, type RequireLike } from '../../../src/services/metering';

const nodeRequire = createRequire(import.meta.url);
const root = new URL('../../../', import.meta.url).pathname;

/** A require that cannot find ai-tokenizer: the gpt-tokenizer path. */
const withoutAi: RequireLike = Object.assign(
  (id: string) => {
    if (id === 'ai-tokenizer' || id.startsWith('ai-tokenizer/')) throw Object.assign(new Error(`Cannot find module '${id}'`), { code: 'MODULE_NOT_FOUND' });
    return nodeRequire(id);
  },
  { resolve: (id: string) => nodeRequire.resolve(id) },
);

function files(dir: string, ends: string[], out: string[] = []): string[] {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) files(path, ends, out);
    else if (ends.some((e) => name.endsWith(e))) out.push(path);
  }
  return out;
}

function strings(value: unknown, out: string[]): void {
  if (typeof value === 'string') {
    if (value.length > 0) out.push(value);
  } else if (Array.isArray(value)) for (const v of value) strings(v, out);
  else if (value !== null && typeof value === 'object') for (const v of Object.values(value)) strings(v, out);
}

/** Every whole line of one transcript fixture and every string in its records (each distinct text once). */
function transcriptTexts(file: string): string[] {
  const out = new Set<string>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line.length === 0) continue;
    out.add(line);
    const found: string[] = [];
    try {
      strings(JSON.parse(line), found);
    } catch {
      // A malformed fixture line is a text like any other.
    }
    for (const t of found) out.add(t);
  }
  return [...out];
}

function codeTexts(): string[] {
  const out: string[] = [];
  for (const file of files(join(root, 'src'), ['.ts']).concat(files(join(root, 'docs'), ['.md']))) {
    const text = readFileSync(file, 'utf8');
    out.push(text);
    const lines = text.split('\n');
    for (let i = 0; i < lines.length; i += 12) out.push(lines.slice(i, i + 12).join('\n'));
  }
  return out;
}

/** Numbers as tool output has them: integers, decimals, hex, dates, tables, runs of digits. */
function digitTexts(): string[] {
  let seed = 45;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const out: string[] = [];
  for (let i = 0; i < 400; i++) {
    let s = '';
    for (let k = 5 + Math.floor(rnd() * 120); k > 0; k--) {
      const r = rnd();
      if (r < 0.25) s += String(Math.floor(rnd() * 1e15));
      else if (r < 0.45) s += (rnd() * 1e5 - 5e4).toFixed(Math.floor(rnd() * 9));
      else if (r < 0.55) s += `0x${Math.floor(rnd() * 2 ** 32).toString(16)}`;
      else if (r < 0.65)
        s += `2026-${String(1 + Math.floor(rnd() * 12)).padStart(2, '0')}-${String(1 + Math.floor(rnd() * 28)).padStart(2, '0')}T${Math.floor(rnd() * 24)}:${Math.floor(rnd() * 60)}`;
      else if (r < 0.75) s += ` | ${Math.floor(rnd() * 1000)} | ${(rnd() * 100).toFixed(2)}% |`;
      else if (r < 0.85) s += '\n';
      else s += ' '.repeat(1 + Math.floor(rnd() * 4));
    }
    out.push(s, '9'.repeat(1 + i * 7));
  }
  return out;
}

function cjkTexts(): string[] {
  const messages = Object.values(
    JSON.parse(readFileSync(nodeRequire.resolve('typescript/lib/zh-cn/diagnosticMessages.generated.json'), 'utf8')) as Record<string, string>,
  );
  return [...messages.slice(0, 3000), messages.join('\n')];
}

const CORPORA: Array<[string, () => string[]]> = [
  ...files(join(root, 'test/fixtures'), ['.jsonl']).map((f): [string, () => string[]] => [f.slice(root.length), () => transcriptTexts(f)]),
  ["the project's code and docs", codeTexts],
  ['digit-heavy text', digitTexts],
  ['CJK text', cjkTexts],
];

describe.each(['o200k_base', 'cl100k_base'] as GptEncodingName[])('%s: ai-tokenizer counts as gpt-tokenizer does', (name) => {
  const gpt = createGptTokenizer(name, withoutAi);
  const ai = loadAiCounter(name)!;

  it('is installed (a devDependency), so the test compares two counters', () => {
    expect(ai).toBeTypeOf('function');
    expect(loadAiCounter(name, withoutAi)).toBeUndefined();
  });

  // Minutes of counting on a loaded machine: a generous timeout per corpus.
  it.each(CORPORA)('on %s: the same count for every text', (_, texts) => {
    const list = texts();
    expect(list.length).toBeGreaterThan(0);
    const differ = list.filter((t) => ai(t) !== gpt.count(t));
    expect(differ.map((t) => t.slice(0, 120))).toEqual([]);
  });

  it('on special-token literals (ordinary text for both) and random Unicode', () => {
    for (const t of ['<|endoftext|>', 'a <|endoftext|> b <|im_start|>user<|im_sep|> c <|fim_prefix|>', '<|endofprompt|>']) expect(ai(t)).toBe(gpt.count(t));
    // Object.prototype's keys as pieces: ai-tokenizer's own table would find the functions.
    for (const t of ['valueOf', 'constructor', 'toString', '__proto__', 'hasOwnProperty', 'x.valueOf()\nconstructor(a)']) expect(ai(t)).toBe(gpt.count(t));
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (t) => ai(t) === gpt.count(t)),
      { numRuns: 2000 },
    );
  });
});

describe('getTokenizer', () => {
  it('counts o200k with ai-tokenizer when it is installed', () => {
    getTokenizer('o200k_base').count('hello');
    expect(Object.keys(nodeRequire.cache).some((p) => /ai-tokenizer[\\/]dist[\\/]encoding[\\/]o200k_base/.test(p))).toBe(true);
  });

  it('falls back to gpt-tokenizer without it, with the same counts and the same interface', () => {
    const fast = createGptTokenizer('o200k_base');
    const slow = createGptTokenizer('o200k_base', withoutAi);
    expect({ ...slow, count: undefined }).toEqual({ ...fast, count: undefined });
    const text = readFileSync(join(root, 'src/services/metering/tokenizers/gpt.ts'), 'utf8');
    expect(fast.count(text)).toBe(slow.count(text));
    expect(fast.count('')).toBe(0);
  });
});
