/**
 * The tokenizer each route counts with. In-process tokenizers are shared (getTokenizer); a route
 * whose tokenizer is `server` gets a ServerTokenizer of its own, asking the tokenize endpoint of
 * the model's server: the model's `tokenizerUrl`, else the client's base URL without `/v1`
 * (llama.cpp and vLLM serve /tokenize at the root). Its stand-in while the server's counts are
 * not in is the model's built-in tokenizer, else o200k_base.
 */
import { ConfigError, DEFAULT_TOKENIZER, BUILTIN_MODELS, modelInfoFor, type CompactionConfig } from '../config';
import { getTokenizer, modelKey, SERVER_TOKENIZER, ServerTokenizer, serverTokenizeUrl, type Tokenizer, type TokenizerName } from '../metering';

export interface RouteTokenizerOptions {
  config: CompactionConfig;
  /** The name each route resolves to (`options.tokenizer` forces one). */
  tokenizerName: (provider: string | undefined, model: string | undefined) => TokenizerName;
  /** The client's base URL (the openai SDK's `baseURL`) and key, when there is a client. */
  baseURL?: string | undefined;
  apiKey?: string | undefined;
  /** For tests and benches: the server tokenizer's deadline per prefetch (ms). */
  deadlineMs?: number;
}

export interface RouteTokenizers {
  tokenizerFor(provider: string | undefined, model: string | undefined): Tokenizer;
}

/**
 * Builds the routes' tokenizers. Throws ConfigError when a model counts with `server` and no
 * tokenize endpoint can be named (no tokenizerUrl, and no client base URL to derive one from).
 */
export function createRouteTokenizers(o: RouteTokenizerOptions): RouteTokenizers {
  const servers = new Map<string, ServerTokenizer>();
  const endpointOf = (provider: string | undefined, model: string | undefined): string | undefined => {
    const info = provider && model ? modelInfoFor(o.config, provider, model) : undefined;
    return info?.tokenizerUrl ?? (o.baseURL ? serverTokenizeUrl(o.baseURL) : undefined);
  };
  checkEndpoints(o, endpointOf);
  return {
    tokenizerFor(provider, model) {
      const name = o.tokenizerName(provider, model);
      if (name !== SERVER_TOKENIZER) return getTokenizer(name);
      const key = provider && model ? modelKey(provider, model) : '';
      const builtin = Object.hasOwn(BUILTIN_MODELS, key) ? BUILTIN_MODELS[key]!.tokenizer : DEFAULT_TOKENIZER;
      const fallback = getTokenizer(builtin === SERVER_TOKENIZER ? DEFAULT_TOKENIZER : builtin);
      const url = endpointOf(provider, model);
      // Checked at creation for every configured route; a route met later without one counts in process.
      if (url === undefined) return fallback;
      const id = `${url}#${model ?? ''}`;
      let t = servers.get(id);
      if (!t) {
        const headers = o.apiKey && o.baseURL && sameOrigin(url, o.baseURL) ? { authorization: `Bearer ${o.apiKey}` } : undefined;
        t = new ServerTokenizer({
          url,
          model: model ?? '',
          fallback,
          ...(headers ? { headers } : {}),
          ...(o.deadlineMs !== undefined ? { deadlineMs: o.deadlineMs } : {}),
        });
        servers.set(id, t);
      }
      return t;
    },
  };
}

function checkEndpoints(o: RouteTokenizerOptions, endpointOf: (provider: string | undefined, model: string | undefined) => string | undefined): void {
  const problems: { path: string; message: string }[] = [];
  const forced = o.tokenizerName(undefined, undefined) === SERVER_TOKENIZER;
  const anyUrl = Object.values(o.config.models).some((m) => m.tokenizerUrl !== undefined);
  if (forced && endpointOf(undefined, undefined) === undefined && !anyUrl) {
    problems.push({
      path: 'config.tokenizer',
      message: `config.tokenizer = "server" needs a tokenize endpoint: pass the client (its baseURL names the server) or give each model a tokenizerUrl`,
    });
  }
  for (const key of Object.keys(o.config.models)) {
    const slash = key.indexOf('/');
    const provider = key.slice(0, slash);
    const model = key.slice(slash + 1);
    if (o.tokenizerName(provider, model) !== SERVER_TOKENIZER || endpointOf(provider, model) !== undefined) continue;
    const path = `config.models[${JSON.stringify(key)}].tokenizer`;
    problems.push({
      path,
      message: `${path} = "server" has no tokenize endpoint: pass a client whose baseURL is the model's server (e.g. http://127.0.0.1:8080/v1), or set tokenizerUrl (e.g. "http://127.0.0.1:8080/tokenize")`,
    });
  }
  const d = o.deadlineMs;
  if (d !== undefined && !(typeof d === 'number' && Number.isFinite(d) && d > 0)) {
    problems.push({
      path: 'tokenizerDeadlineMs',
      message: `tokenizerDeadlineMs = ${String(d)} must be a number of milliseconds greater than 0: use e.g. 300 (the default)`,
    });
  }
  if (problems.length > 0) throw new ConfigError(problems);
}

function sameOrigin(a: string, b: string): boolean {
  try {
    return new URL(a).origin === new URL(b).origin;
  } catch {
    return false;
  }
}
