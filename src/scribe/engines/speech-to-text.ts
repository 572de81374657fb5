// Speech to text through an OpenAI-compatible /audio/transcriptions endpoint (OpenAI, whisper.cpp server,
// faster-whisper servers, vLLM, LiteLLM, ...): a multipart upload of the file with `model`; the answer's
// `text` is the transcript. When the answer carries speaker-labelled segments (diarizing engines), each
// segment becomes a `Speaker: text` line, which the note generators read as speaker turns.
import type { EngineConfig } from '../../config.js';
import { EngineError } from './engine.js';
import type { AudioInput, SpeechToText } from './engine.js';
import { callEngine } from './http.js';

interface Segment {
  speaker?: unknown;
  text?: unknown;
}

/** The transcript in an answer: speaker-labelled segments when there are any, else `text`. */
export function transcriptFromAnswer(answer: unknown): string {
  const { text, segments } = (answer ?? {}) as { text?: unknown; segments?: unknown };
  if (
    Array.isArray(segments) &&
    segments.length > 0 &&
    segments.every((s: Segment) => typeof s?.speaker === 'string')
  ) {
    const lines: string[] = [];
    let speaker: string | undefined;
    for (const segment of segments as Segment[]) {
      const said = typeof segment.text === 'string' ? segment.text.trim() : '';
      if (said === '') continue;
      if (segment.speaker === speaker) lines[lines.length - 1] += ` ${said}`;
      else lines.push(`${segment.speaker as string}: ${said}`);
      speaker = segment.speaker as string;
    }
    if (lines.length > 0) return lines.join('\n');
  }
  if (typeof text !== 'string') throw new EngineError('speech-to-text engine: the answer has no "text"', true);
  return text.trim();
}

export class TranscriptionEngine implements SpeechToText {
  readonly name: string;

  constructor(
    private readonly engine: EngineConfig,
    private readonly options: { retryBaseMs?: number } = {},
  ) {
    this.name = `stt:${engine.model}`;
  }

  async transcribe(audio: AudioInput, signal: AbortSignal): Promise<string> {
    const answer = await callEngine({
      engine: this.engine,
      what: 'speech-to-text engine',
      path: '/audio/transcriptions',
      signal,
      retryBaseMs: this.options.retryBaseMs,
      body: () => {
        const form = new FormData();
        form.append('file', new Blob([audio.data], { type: audio.contentType }), audio.filename);
        form.append('model', this.engine.model);
        form.append('response_format', 'json');
        return form;
      },
    });
    return transcriptFromAnswer(answer);
  }
}
