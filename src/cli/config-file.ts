/**
 * The CLI's configuration file: an xcompact configuration as JSON (the same fields as
 * `createCompactionEngine({ config })`, including `models`). Given with --config, or found as
 * `xcompact.config.json` next to the session (the demo writes one there).
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseConfig, type CompactionConfig, type CompactionConfigInput } from '../services/config';
import { CliError, oneLine } from './errors';
import { jsonErrorLocation } from './load';

export const CONFIG_FILE_NAME = 'xcompact.config.json';

export interface LoadedConfig {
  input: CompactionConfigInput;
  parsed: CompactionConfig;
  /** Where it came from, for the report; undefined = defaults. */
  path: string | undefined;
}

export function loadConfig(explicit: string | undefined, nextTo: string): LoadedConfig {
  const candidate = explicit ?? join(dirname(nextTo), CONFIG_FILE_NAME);
  if (explicit === undefined && !existsSync(candidate)) return { input: {}, parsed: parseConfig({}), path: undefined };
  let text: string;
  try {
    text = readFileSync(candidate, 'utf8');
  } catch (err) {
    throw new CliError(
      `cannot read the configuration ${candidate}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}; check the --config path.`,
    );
  }
  let input: unknown;
  try {
    input = JSON.parse(text);
  } catch (err) {
    const at = jsonErrorLocation(text, err as Error);
    throw new CliError(`${candidate}${at ? `:${at.line}:${at.column}` : ''}: the configuration is not valid JSON (${(err as Error).message}); fix that line.`);
  }
  try {
    return { input: input as CompactionConfigInput, parsed: parseConfig(input), path: candidate };
  } catch (err) {
    throw new CliError(`${candidate}: ${oneLine((err as Error).message)}`, 1, { cause: err });
  }
}
