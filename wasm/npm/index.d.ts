// Types of roformer-wasm (index.js).

export interface InitOptions {
  /**
   * Which build to load: "auto" (the default) takes the relaxed-SIMD module where the engine
   * validates relaxed SIMD (Chromium 114+), else the simd128 one; "plain" forces the simd128
   * module; "relaxed" forces the relaxed one (an Error where the engine cannot run it).
   * With `wasm`, it says which build that is.
   */
  simd?: "auto" | "relaxed" | "plain";
  /** The module to load instead of the packaged file: a URL, its bytes, or a compiled module. */
  wasm?: string | URL | ArrayBuffer | ArrayBufferView | WasmModule;
}

/** WebAssembly.Module where the program's libs declare it (dom, webworker); else any object. */
export type WasmModule = typeof globalThis extends { WebAssembly: { Module: { prototype: infer M } } } ? M : object;

export interface InitResult {
  /** The build this thread runs. */
  simd: "relaxed" | "plain";
}

/**
 * Loads the WebAssembly module on this thread; needed before loading a model without workers.
 * Called again, it resolves as the first call did; a call forcing the other build rejects.
 */
export default function init(options?: InitOptions): Promise<InitResult>;

/** The build init() loaded on this thread, or null before. */
export function simd(): "relaxed" | "plain" | null;

/** The bytes of this thread's WebAssembly memory (0 before init()). */
export function memoryBytes(): number;

/** dot(a, b) / (|a| |b|); 0 when either is all zeros. Throws when the lengths differ. */
export function cosineSimilarity(a: ArrayLike<number>, b: ArrayLike<number>): number;

/** A model folder's files, by their path inside it ("config.json", "1_Pooling/config.json"). */
export type ModelFiles = Record<string, Uint8Array | ArrayBuffer>;

/** Load options, all optional. An unknown key is refused with an Error naming it. */
export interface LoadOptions {
  /** "int8": int8 weights and activations in the encoder's linear layers; "none" (or "f32", the default) keeps f32. */
  quantize?: "none" | "f32" | "int8";
  /** Tokens per input, special tokens included; longer inputs are truncated (default: the tokenizer's model_max_length, else 512). */
  maxLength?: number;
  /** Texts per forward pass (default 32). */
  batchSize?: number;
  /** Sentence encoders: the pooling, overriding the folder's. */
  pooling?: "mean" | "cls" | "pooler";
  /** Sentence encoders: unit-length embeddings. */
  normalize?: boolean;
  /** Sentence encoders: a prompt text put before every text. */
  prompt?: string;
  /** Sentence encoders: one of the folder's prompts, by name, put before every text. */
  promptName?: string;
  /** The folder's name in error messages ("model" by default). */
  name?: string;
  /** fromUrl: called with each file's path and size as it is fetched (by worker 0 under a pool). */
  onProgress?: (path: string, bytes: number) => void;
}

/** Options with a pool: `workers` n ≥ 1 gives Promise results, computed on n workers. */
export interface PoolOptions extends LoadOptions {
  /**
   * The number of workers (Web Workers; worker_threads in Node), a whole number. 0 at run time
   * gives the synchronous object, as without the option.
   */
  workers: number;
}

export interface Classification {
  label: string;
  score: number;
}

/** The module's own classifier: synchronous calls on this thread. */
export interface SyncTextClassifier {
  /** `{label, score}` per text, in order. */
  classify(texts: string[]): Classification[];
  /** `{label, score}` per `[text, textPair]`, in order. */
  classifyPairs(pairs: [string, string][]): Classification[];
  /** The encoder under the classifier, sharing its weights (mean pooling). */
  sentenceEncoder(): SyncSentenceEncoder;
  /** The class names, by id (`id2label`). */
  readonly labels: string[];
  free(): void;
}

/** The module's own sentence encoder: synchronous calls on this thread. */
export interface SyncSentenceEncoder {
  /** One embedding per text, in order; `prompt` names one of the folder's prompts. */
  encode(texts: string[], prompt?: string | null): Float32Array[];
  /** The prompts of the folder's config_sentence_transformers.json, by name. */
  readonly promptNames: string[];
  /** The embedding size. */
  readonly dim: number;
  free(): void;
}

interface Pooled {
  /** The bytes of WebAssembly memory of all its workers together. */
  memoryBytes(): Promise<number>;
  /**
   * Ends its workers, once every object sharing them (a classifier and the encoders derived
   * from it) is freed. Later calls reject.
   */
  free(): void;
}

/** A classifier on a pool of workers: each call's inputs are split over them. */
export interface PooledTextClassifier extends Pooled {
  classify(texts: string[]): Promise<Classification[]>;
  classifyPairs(pairs: [string, string][]): Promise<Classification[]>;
  /** The encoder under the classifier, on the same workers. */
  sentenceEncoder(): Promise<PooledSentenceEncoder>;
  readonly labels: string[];
}

/** A sentence encoder on a pool of workers. */
export interface PooledSentenceEncoder extends Pooled {
  encode(texts: string[], prompt?: string | null): Promise<Float32Array[]>;
  readonly promptNames: string[];
  readonly dim: number;
}

export type TextClassifier = SyncTextClassifier | PooledTextClassifier;
export type SentenceEncoder = SyncSentenceEncoder | PooledSentenceEncoder;

export declare const TextClassifier: {
  /** On this thread (after init()): the classifier, synchronously. */
  fromFiles(files: ModelFiles, options?: LoadOptions & { workers?: 0 }): SyncTextClassifier;
  /** On `options.workers` workers: a Promise of the pooled classifier. */
  fromFiles(files: ModelFiles, options: PoolOptions): Promise<PooledTextClassifier>;
  /** The folder's files fetched from `baseUrl` (a static folder or a Hub repo's `.../resolve/main/`). */
  fromUrl(baseUrl: string, options?: LoadOptions & { workers?: 0 }): Promise<SyncTextClassifier>;
  fromUrl(baseUrl: string, options: PoolOptions): Promise<PooledTextClassifier>;
  [Symbol.hasInstance](value: unknown): value is TextClassifier;
};

export declare const SentenceEncoder: {
  fromFiles(files: ModelFiles, options?: LoadOptions & { workers?: 0 }): SyncSentenceEncoder;
  fromFiles(files: ModelFiles, options: PoolOptions): Promise<PooledSentenceEncoder>;
  fromUrl(baseUrl: string, options?: LoadOptions & { workers?: 0 }): Promise<SyncSentenceEncoder>;
  fromUrl(baseUrl: string, options: PoolOptions): Promise<PooledSentenceEncoder>;
  [Symbol.hasInstance](value: unknown): value is SentenceEncoder;
};
