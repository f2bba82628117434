/**
 * The two AI SDK majors at the model boundary: `ai` 6 speaks provider spec v3, `ai` 7 spec v4
 * (and takes v3 models too). The types here are structural, so that a model or middleware of
 * either major type-checks whichever `@ai-sdk/provider` is installed (the v3 package has no v4
 * types); the adapter reads the spec at each call.
 */
import type { LanguageModelV3, LanguageModelV3CallOptions, LanguageModelV3Middleware } from '@ai-sdk/provider';
import type { SpecVersion } from './convert';

/**
 * An AI SDK language model of provider spec v3 (`ai` 6, `@ai-sdk/*` providers of that line) or
 * v4 (`ai` 7). Structural, so that a model of either major type-checks whichever
 * `@ai-sdk/provider` is installed (the v3 package has no v4 types).
 */
export interface AiSdkLanguageModel {
  readonly specificationVersion: 'v3' | 'v4';
  readonly provider: string;
  readonly modelId: string;
  doGenerate(options: never): PromiseLike<unknown>;
  doStream(options: never): PromiseLike<unknown>;
}

/**
 * The adapter as a language-model middleware, for `wrapLanguageModel` of `ai` 6 (which passes it
 * spec v3 calls) or `ai` 7 (spec v4 calls; it accepts a middleware marked v3). The call options
 * and results are those of the spec the SDK passes, read at run time: typed loosely so the one
 * object is accepted by both majors' `wrapLanguageModel`.
 */
export interface AiSdkMiddleware {
  readonly specificationVersion: 'v3';
  wrapGenerate: (options: any) => PromiseLike<any>;
  wrapStream: (options: any) => PromiseLike<any>;
}

/** The spec of the model a middleware call wraps (`ai` 7's `wrapLanguageModel` hands it v4). */
export const specOf = (model: { specificationVersion: string }): SpecVersion => (model.specificationVersion === 'v4' ? 'v4' : 'v3');

/**
 * The base model with the middleware in front, keeping the base's spec (and everything else the
 * base has): not `wrapLanguageModel`, whose result has the spec of the `ai` major that made it
 * (`ai` 6's cannot wrap a v4 model, `ai` 7's turns a v3 model into a v4 one).
 */
export function wrapModel<M extends AiSdkLanguageModel>(base: M, middleware: Pick<LanguageModelV3Middleware, 'wrapGenerate' | 'wrapStream'>): M {
  const model = base as unknown as LanguageModelV3;
  const doGenerate = (params: LanguageModelV3CallOptions) =>
    middleware.wrapGenerate!({ params, model, doGenerate: () => model.doGenerate(params), doStream: () => model.doStream(params) });
  const doStream = (params: LanguageModelV3CallOptions) =>
    middleware.wrapStream!({ params, model, doGenerate: () => model.doGenerate(params), doStream: () => model.doStream(params) });
  return new Proxy(base, {
    get(target, prop) {
      if (prop === 'doGenerate') return doGenerate;
      if (prop === 'doStream') return doStream;
      return Reflect.get(target, prop);
    },
  });
}
