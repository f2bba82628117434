/**
 * A made-up TypeScript project for the scripted coding agent to work on: an HTTP client
 * library whose retry logic ignores `Retry-After`. Files are generated from a seed, in
 * realistic and varied sizes (a few hundred characters to ~20 KB), so tool outputs range
 * from tiny to well over the pruner's threshold. The demo serves it from memory; tests write
 * it to a sandbox directory for the example's real tools.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { createRandom, type Random } from './random';

export type ProjectFiles = Map<string, string>;

const NOUNS = [
  'request',
  'response',
  'retry',
  'backoff',
  'token',
  'session',
  'cache',
  'header',
  'timeout',
  'payload',
  'client',
  'queue',
  'socket',
  'stream',
  'config',
  'logger',
  'metric',
  'span',
  'user',
  'order',
  'invoice',
  'budget',
];
const VERBS = [
  'get',
  'set',
  'build',
  'parse',
  'send',
  'handle',
  'create',
  'load',
  'resolve',
  'format',
  'validate',
  'merge',
  'compute',
  'flush',
  'open',
  'close',
];
const TYPES = ['RequestOptions', 'RetryPolicy', 'HttpResponse', 'CacheEntry', 'Logger', 'Clock', 'TransportError', 'UserRecord', 'OrderLine', 'Invoice'];

const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

function identifier(r: Random): string {
  return `${r.pick(VERBS)}${cap(r.pick(NOUNS))}${r.chance(0.4) ? cap(r.pick(NOUNS)) : ''}`;
}

function statement(r: Random, indent: string): string {
  const a = r.pick(NOUNS);
  const b = r.pick(NOUNS);
  switch (r.int(0, 9)) {
    case 0:
      return `${indent}const ${a}${cap(b)} = await ${identifier(r)}(${a}, { timeoutMs: ${r.int(1, 60) * 500} });`;
    case 1:
      return `${indent}if (${a}.status === ${r.pick([408, 429, 500, 502, 503, 504])}) {\n${indent}  throw new TransportError(\`${a} failed with \${${a}.status}\`, { retryable: ${r.chance(0.5)} });\n${indent}}`;
    case 2:
      return `${indent}// TODO(${r.pick(['mz', 'kb', 'ops'])}): ${r.pick(['honour Retry-After', 'cap the jitter', 'log the attempt', 'drop stale entries', 'measure latency'])} here`;
    case 3:
      return `${indent}logger.debug('${identifier(r)}', { ${a}: ${a}.id, attempt, elapsedMs: clock.now() - startedAt });`;
    case 4:
      return `${indent}for (const ${a} of ${b}s) {\n${indent}  ${a}.${identifier(r)}(${r.int(0, 9)});\n${indent}}`;
    case 5:
      return `${indent}const ${a}Key = \`\${${b}.id}:\${${a}.version ?? 0}\`;`;
    case 6:
      return `${indent}if (!${a}) return undefined;`;
    case 7:
      return `${indent}${a}s.set(${a}.id, { ...${a}, updatedAt: clock.now(), ${b}: ${identifier(r)}(${b}) });`;
    case 8:
      return `${indent}const delayMs = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** attempt) + Math.floor(random() * ${r.int(50, 400)});`;
    default:
      return `${indent}return { ok: true, ${a}, ${b}: ${b} ?? null };`;
  }
}

function functionSource(r: Random): string {
  const name = identifier(r);
  const lines = [
    `/** ${cap(r.pick(VERBS))}s the ${r.pick(NOUNS)} ${r.pick(['for one attempt', 'from the cache when fresh', 'and records a metric', 'with the policy defaults'])}. */`,
    `export ${r.chance(0.6) ? 'async ' : ''}function ${name}(${r.pick(NOUNS)}: ${r.pick(TYPES)}, attempt = 0): ${r.chance(0.5) ? `Promise<${r.pick(TYPES)}>` : r.pick(TYPES)} {`,
  ];
  const n = r.int(3, 12);
  for (let i = 0; i < n; i++) lines.push(statement(r, '  '));
  lines.push('}');
  return lines.join('\n');
}

function tsModule(r: Random, targetChars: number, header: string): string {
  const parts = [header];
  while (parts.join('\n\n').length < targetChars) parts.push(functionSource(r));
  return `${parts.join('\n\n')}\n`;
}

function prose(r: Random, targetChars: number, title: string): string {
  const sentences = [
    'Every request goes through the transport, which owns the socket pool and the per-host limits.',
    'Retries are decided by the RetryPolicy: a response is retryable when its status is 408, 429 or 5xx.',
    'The backoff doubles each attempt up to maxDelayMs and adds jitter so that clients do not synchronise.',
    'A 429 response may carry a Retry-After header in seconds or as an HTTP date; it must take precedence over the computed backoff.',
    'The cache is an LRU keyed by method and URL; entries carry the ETag and are revalidated when stale.',
    'Errors are TransportError instances with a retryable flag and the attempt number.',
    'Metrics are emitted per attempt (latency, status, bytes) and aggregated per host.',
    'Configuration is validated once at construction; unknown keys are rejected with the closest valid name.',
  ];
  const parts = [`# ${title}`, ''];
  let section = 1;
  while (parts.join('\n').length < targetChars) {
    if (r.chance(0.2)) parts.push('', `## ${section++}. ${cap(r.pick(NOUNS))} ${r.pick(['handling', 'lifecycle', 'limits', 'configuration'])}`, '');
    parts.push(Array.from({ length: r.int(2, 5) }, () => r.pick(sentences)).join(' '));
  }
  return `${parts.join('\n')}\n`;
}

function logFile(r: Random, targetChars: number): string {
  const lines: string[] = [];
  let t = Date.UTC(2025, 10, 20, 9, 0, 0);
  while (lines.join('\n').length < targetChars) {
    t += r.int(5, 900);
    const status = r.pick([200, 200, 200, 429, 503, 200, 504]);
    const host = r.pick(['api.example.test', 'billing.example.test', 'users.example.test']);
    const attempt = r.int(0, 4);
    lines.push(
      `${new Date(t).toISOString()} ${status >= 400 ? 'WARN ' : 'INFO '} transport host=${host} method=${r.pick(['GET', 'POST', 'PUT'])} path=/v2/${r.pick(NOUNS)}s/${r.int(1000, 99999)} status=${status} attempt=${attempt} latencyMs=${r.int(3, 2400)}${status === 429 ? ` retryAfter=${r.int(1, 30)}s backoffMs=${r.int(100, 3200)} (Retry-After ignored)` : ''}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** The made-up project, keyed by POSIX path relative to the project root. */
export function generateProject(seed = 1): ProjectFiles {
  const r = createRandom(seed * 7919 + 17);
  const size = (n: number) => Math.round(n * (0.75 + r.next() * 0.5));
  const files: ProjectFiles = new Map();
  const header = (imports: string) => `/* eslint-disable */\n${imports}`;
  files.set(
    'package.json',
    `${JSON.stringify(
      {
        name: 'fetchkit',
        version: '2.3.1',
        type: 'module',
        scripts: { build: 'tsc -p tsconfig.json', test: 'vitest run', lint: 'eslint src test' },
        dependencies: { undici: '6.19.8' },
        devDependencies: { typescript: '5.9.3', vitest: '4.1.12', eslint: '9.11.0' },
      },
      null,
      2,
    )}\n`,
  );
  files.set(
    'tsconfig.json',
    `${JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', strict: true, outDir: 'dist' }, include: ['src'] }, null, 2)}\n`,
  );
  files.set('README.md', prose(r, size(2600), 'fetchkit — a small HTTP client with retries'));
  files.set('CHANGELOG.md', prose(r, size(1600), 'Changelog'));
  files.set(
    'src/index.ts',
    "export * from './net/client.js';\nexport * from './net/retry.js';\nexport * from './net/errors.js';\nexport * from './cache/lru.js';\n",
  );
  const netImports =
    "import { TransportError } from './errors.js';\nimport type { RetryPolicy, RequestOptions, HttpResponse } from './types.js';\nimport { logger, clock } from '../util/log.js';\n";
  files.set('src/net/client.ts', tsModule(r, size(7000), header(netImports)));
  files.set(
    'src/net/retry.ts',
    `${header(netImports)}\nexport const DEFAULT_POLICY: RetryPolicy = { maxAttempts: 4, baseDelayMs: 250, maxDelayMs: 8000 };\n\n/** The delay before the next attempt. Ignores Retry-After (see issue #212). */\nexport function nextDelay(policy: RetryPolicy, attempt: number, response?: HttpResponse): number {\n  const backoff = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** attempt);\n  return backoff + Math.floor(Math.random() * 100);\n}\n\n${tsModule(r, size(1800), '')}`,
  );
  files.set(
    'src/net/errors.ts',
    tsModule(
      r,
      size(1500),
      header(
        'export class TransportError extends Error {\n  constructor(message: string, readonly details: { retryable: boolean; attempt?: number }) {\n    super(message);\n  }\n}\n',
      ),
    ),
  );
  files.set('src/net/http.ts', tsModule(r, size(4500), header(netImports)));
  files.set('src/net/transport.ts', tsModule(r, size(11000), header(netImports)));
  files.set('src/net/types.ts', tsModule(r, size(1200), header('')));
  files.set('src/cache/lru.ts', tsModule(r, size(3000), header("import type { CacheEntry } from '../net/types.js';\n")));
  files.set('src/cache/store.ts', tsModule(r, size(5000), header("import { LruCache } from './lru.js';\n")));
  files.set('src/util/log.ts', tsModule(r, size(1100), header('')));
  files.set('src/util/time.ts', tsModule(r, size(900), header('')));
  files.set('src/util/json.ts', tsModule(r, size(1600), header('')));
  files.set('src/api/users.ts', tsModule(r, size(3200), header("import { createClient } from '../net/client.js';\n")));
  files.set('src/api/orders.ts', tsModule(r, size(5600), header("import { createClient } from '../net/client.js';\n")));
  files.set('src/api/billing.ts', tsModule(r, size(4200), header("import { createClient } from '../net/client.js';\n")));
  files.set('src/generated/schema.ts', tsModule(r, size(18000), header('// Generated from openapi.yaml — do not edit.\n')));
  files.set('test/client.test.ts', tsModule(r, size(4000), header("import { describe, expect, it } from 'vitest';\n")));
  files.set(
    'test/retry.test.ts',
    tsModule(r, size(2500), header("import { describe, expect, it } from 'vitest';\nimport { nextDelay } from '../src/net/retry.js';\n")),
  );
  files.set('test/cache.test.ts', tsModule(r, size(3000), header("import { describe, expect, it } from 'vitest';\n")));
  files.set('docs/ARCHITECTURE.md', prose(r, size(9500), 'Architecture'));
  files.set('logs/retry-failures.log', logFile(r, size(16000)));
  return files;
}

/** Writes the project under `dir` (for tools that work on a real directory). */
export async function writeProject(dir: string, files: ProjectFiles): Promise<void> {
  for (const [path, text] of files) {
    const full = join(dir, path);
    await mkdir(dirname(full), { recursive: true });
    await writeFile(full, text);
  }
}
