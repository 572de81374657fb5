// The small interfaces the job processor talks to, so that engines can be swapped: note generation
// (built-in deterministic generator, or an OpenAI-compatible chat-completions endpoint) and speech to text
// (an OpenAI-compatible /audio/transcriptions endpoint).
import type { ScribeTemplate } from '../templates.js';

export interface NoteSection {
  readonly title: string;
  readonly text: string;
}

/** Everything a generator may use to write one note. */
export interface NoteRequest {
  readonly template: ScribeTemplate;
  /** The visit's transcripts, in order; speaker turns as lines like `Doctor: ...`. */
  readonly transcripts: readonly string[];
  readonly patientName?: string;
  readonly dateOfService?: string;
  readonly additionalContext?: Readonly<Record<string, unknown>>;
}

export interface NoteGenerator {
  /** For logs and the document's description, e.g. "built-in" or "llm:gpt-4o-mini". */
  readonly name: string;
  /** The template's sections, in the template's order, with their text. */
  generate(request: NoteRequest, signal: AbortSignal): Promise<NoteSection[]>;
}

export interface AudioInput {
  readonly filename: string;
  readonly contentType: string;
  readonly data: Buffer;
}

export interface SpeechToText {
  readonly name: string;
  transcribe(audio: AudioInput, signal: AbortSignal): Promise<string>;
}

/**
 * An engine failed. `retryable` errors (timeouts, network errors, 408, 429, 5xx, unusable answers) are
 * worth another attempt of the job later; the others (bad configuration, 4xx) end the record FAILED.
 */
export class EngineError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}
