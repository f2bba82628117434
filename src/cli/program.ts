/**
 * The `xcompact` command. Thin by design: commander parses the arguments, each subcommand
 * calls the public API (session, engine, summarizers) and prints what happened.
 *
 * Everything it reads from and writes to its process goes through `CliIO` (argv aside), so
 * the command runs the same in a process of its own (main.ts) and in-process (the tests:
 * a spawned `tsx` costs seconds of compiling per run): the exit code is returned, never
 * passed to process.exit.
 */
import { readFileSync } from 'node:fs';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import type { runCompact } from './compact';
import type { EvalCliOptions } from './eval';
import { reportError } from './errors';
import { useColor, type CliEnv } from './ui';
// Each command's module is loaded when the command runs: `--version`, `--help` and a refused
// option answer without loading the engine, the SDKs and the tokenizer tables (`--version`
// through tsx: 2.5 s → 1.4 s).

function packageVersion(): string {
  // src/cli/program.ts and dist/cli/main.js (its bundle) both sit two levels below the package root.
  try {
    return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

function wholeNumber(what: string, min = 0) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min) {
      throw new InvalidArgumentError(`${what} must be a whole number${min > 0 ? ` ≥ ${min}` : ''}, got "${value}".`);
    }
    return n;
  };
}

const verboseOption = () => new Option('--verbose', 'print stack traces with errors');
const storeOption = (what: string) =>
  new Option('--store <postgres-url>', `${what} in PostgreSQL: postgres://user:password@host:5432/database (the session is then named by its id)`);

/** The process the command talks to: output streams and the environment (NO_COLOR, API keys, OPENAI_BASE_URL). */
export interface CliIO {
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
  env: CliEnv;
}

export function buildProgram(io: CliIO = processIO()): Command {
  const { stdout, stderr, env } = io;
  const program = new Command('xcompact')
    // Set before the subcommands are added: they inherit both.
    .configureOutput({
      writeOut: (s) => void stdout.write(s),
      writeErr: (s) => void io.stderr.write(s),
      getOutHelpWidth: () => (stdout.isTTY ? stdout.columns : 80),
      getErrHelpWidth: () => (io.stderr.isTTY ? io.stderr.columns : 80),
      getOutHasColors: () => useColor(true, stdout, env),
      getErrHasColors: () => useColor(true, io.stderr, env),
    })
    .exitOverride()
    .description('Keeps long-running LLM agent conversations working near the context limit: summary checkpoints, model-free pruning, overflow recovery.')
    .version(packageVersion(), '-V, --version', 'print the version')
    .addOption(verboseOption())
    .showHelpAfterError('(run with --help for usage)')
    .addHelpText(
      'after',
      '\nStart with:\n  xcompact demo                      watch a scripted agent run a long task in a 16k window\n  xcompact inspect xcompact-demo/demo.jsonl\n',
    );

  program
    .command('demo')
    .description(
      'Run a scripted coding agent on a long task against a built-in local OpenAI-compatible server with a small context window, ' +
        'showing pressure per step, each prune and compaction, one provider overflow and its recovery. No API key needed.',
    )
    .option('--steps <n>', 'agent steps to run (1–2000)', wholeNumber('--steps', 1), 96)
    .option('--window <tokens>', "the model's context window in tokens", wholeNumber('--window', 1), 16384)
    .option('--out <dir>', 'where to write the session JSONL and the inspection trace', 'xcompact-demo')
    .option('--seed <n>', 'seed of the scripted task (same seed, same conversation)', wholeNumber('--seed'), 1)
    .option('--quiet', 'print only the final table (and run without artificial delays)')
    .addOption(storeOption('keep the demo session'))
    .option('--session <id>', 'session id with --store (default: demo-<time>, a fresh session each run)')
    .option('--no-color', 'plain output without ANSI colours')
    .addOption(verboseOption())
    .action(async (opts: { steps: number; window: number; out: string; seed: number; quiet?: boolean; color: boolean; store?: string; session?: string }) => {
      const { runDemo } = await import('./demo');
      await runDemo(
        {
          steps: opts.steps,
          window: opts.window,
          out: opts.out,
          seed: opts.seed,
          quiet: opts.quiet === true,
          color: opts.color,
          env,
          ...(opts.store ? { store: { url: opts.store, session: opts.session } } : {}),
        },
        stdout,
      );
    });

  program
    .command('inspect')
    .description(
      'Show what a stored session holds: events, surface, pressure against the model window, checkpoints, prunes, orphan locks, ' +
        'tokens by role and a torn-tail report. Accepts an xcompact session JSONL or a pi, Claude Code or Codex transcript. Never modifies the file.',
    )
    .argument(
      '<session.jsonl>',
      'an xcompact session file, a pi, Claude Code or Codex transcript (JSONL), or a PostgreSQL session: postgres://user:password@host:5432/database#session-id (or the id with --store)',
    )
    .addOption(storeOption('read the session'))
    .option('--model <provider/model>', 'measure against this model (default: the last request header)')
    .option('--context-window <tokens>', "the model's window, when it is not a built-in model", wholeNumber('--context-window', 1))
    .option('--config <file>', 'xcompact configuration JSON (default: xcompact.config.json next to the session, if any)')
    .option('--json', 'print the report as JSON')
    .option('--no-color', 'plain output without ANSI colours')
    .option(
      '--recall <query>',
      'instead of the report, search what checkpoints and prunes took off the surface, as the recall tool does: text, /regex/, or a handle (cp-N, pr-N)',
    )
    .option('--recall-tokens <tokens>', 'answer budget of --recall in tokens (default 2000, at most 8000)', wholeNumber('--recall-tokens', 1))
    .addOption(verboseOption())
    .action(
      async (
        file: string,
        opts: {
          model?: string;
          contextWindow?: number;
          config?: string;
          json?: boolean;
          color: boolean;
          store?: string;
          recall?: string;
          recallTokens?: number;
        },
      ) => {
        if (opts.recall !== undefined) {
          const { runInspectRecall } = await import('./inspect-recall');
          await runInspectRecall(file, { ...opts, recall: opts.recall }, stdout);
          return;
        }
        const { runInspect } = await import('./inspect');
        await runInspect(file, { ...opts, env }, stdout);
      },
    );

  program
    .command('compact')
    .description(
      'Compact a stored session (xcompact JSONL or pi transcript) or an OpenAI chat-messages JSON file into one summary checkpoint ' +
        'plus the newest messages, with a real endpoint or the model-free extractive summarizer. Writes a new file; the input is never changed unless --in-place.',
    )
    .argument(
      '<file>',
      'session .jsonl, .json holding an array of chat messages or { messages, tools, model }, or a PostgreSQL session: postgres://user:password@host:5432/database#session-id (or the id with --store)',
    )
    .addOption(storeOption('the session is'))
    .addOption(new Option('--summarizer <kind>', 'who writes the summary').choices(['openai', 'extractive']).default('openai'))
    .option('--base-url <url>', 'OpenAI-compatible endpoint (default: $OPENAI_BASE_URL, else https://api.openai.com/v1)')
    .option('--model <provider/model>', "summarization model, e.g. deepseek/deepseek-chat (default: the conversation's model)")
    .option('--api-key-env <name>', 'environment variable holding the API key', 'OPENAI_API_KEY')
    .option('--context-window <tokens>', "the summarization model's window, when it is not a built-in model", wholeNumber('--context-window', 1))
    .option('--max-tokens <tokens>', 'summary output cap (max_tokens)', wholeNumber('--max-tokens', 1), 4096)
    .option('--focus <text>', 'what the summary should focus on (like /compact <focus>)')
    .option('--output <file>', 'where to write the result (default: <name>.compacted.jsonl / .json next to the input)')
    .option('--in-place', 'append the compaction to the input session itself (an xcompact <id>.jsonl or PostgreSQL session only; the log stays append-only)')
    .option('--force', 'overwrite an existing output file')
    .option('--recover', 'close a session left mid-turn by a crash (interrupted calls, open step/turn, orphan lock) before compacting')
    .option('--config <file>', 'xcompact configuration JSON (models, tokenizer, …)')
    .option('--no-color', 'plain output without ANSI colours')
    .addOption(verboseOption())
    .action(async (file: string, opts: Parameters<typeof runCompact>[1]) => {
      const { runCompact } = await import('./compact');
      await runCompact(file, { ...opts, env }, stdout);
    });

  program
    .command('eval')
    .description(
      'Replay transcripts (xcompact sessions, pi, Claude Code, Codex or Gemini CLI files) through xcompact with your config and through simulated peer policies ' +
        "(pi, Codex, opencode, Claude Code, naive) at each window, counted as the harness's provider counted (fitted to the recorded usage), and print cost, cache misses, " +
        "compactions, prunes, peak ÷ window, requests over the window and the memory measures (needed recall, recall after compaction, intent recall), the harness's own run first. Model-free by default.",
    )
    .argument('<transcript...>', 'transcript files, recognised by their records')
    .option(
      '--window <sizes>',
      'context windows to replay at, comma-separated (k = 1,024 tokens; default 32k,128k, leaving out a default too small for a transcript)',
    )
    .option(
      '--unrecorded <tokens>',
      'tokens the harness sent on every request that its transcript does not hold (system prompt, tools); default: fitted to the recorded usage',
    )
    .option('--config <file>', "xcompact configuration JSON for xcompact's run")
    .option('--prices <list>', 'dollars per million tokens: input,cacheRead,cacheWrite,output (e.g. 3,0.3,3.75,15) or named (input=1.25,output=10)')
    .option('--report <file.html>', 'also write one self-contained HTML page: the tables, a cost × recall chart and the request size per step')
    .addOption(new Option('--summarizer <kind>', 'who writes the summaries').choices(['extractive', 'openai']).default('extractive'))
    .option('--base-url <url>', 'OpenAI-compatible endpoint for --summarizer openai (default: $OPENAI_BASE_URL)')
    .option('--api-key-env <name>', 'environment variable holding the API key', 'OPENAI_API_KEY')
    .option('--json', 'print the figures as JSON')
    .option('--no-color', 'plain output without ANSI colours')
    .addOption(verboseOption())
    .action(async (files: string[], opts: EvalCliOptions) => {
      const { runEval } = await import('./eval');
      await runEval(files, { ...opts, env }, stdout, stderr);
    });

  return program;
}

function processIO(): CliIO {
  return { stdout: process.stdout, stderr: process.stderr, env: process.env };
}

/**
 * Runs the command line `argv` (node's form: the first two entries are the runtime and the
 * script) and returns the exit code: 0, 1 for a failure, 2 for a wrong command line (and
 * commander's own codes for its usage errors, whose message it has already written).
 */
export async function runCli(argv: readonly string[], io: CliIO = processIO()): Promise<number> {
  const verbose = argv.includes('--verbose');
  try {
    await buildProgram(io).parseAsync([...argv]);
    return 0;
  } catch (err) {
    // --help, --version and usage errors: commander wrote what it had to say.
    if (err instanceof CommanderError) return err.exitCode;
    return reportError(err, verbose, (s) => void io.stderr.write(s));
  }
}
