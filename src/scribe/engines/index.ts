// The engines a configuration asks for: AMBIENT_LLM_URL → chat-completions notes, else the built-in
// generator; AMBIENT_STT_URL → speech to text, else none (audio_files are refused).
import type { ScribeConfig } from '../../config.js';
import { BuiltinNoteGenerator } from './builtin/generator.js';
import { ChatCompletionsGenerator } from './chat-completions.js';
import type { NoteGenerator, SpeechToText } from './engine.js';
import { TranscriptionEngine } from './speech-to-text.js';

export interface Engines {
  readonly notes: NoteGenerator;
  readonly stt: SpeechToText | undefined;
}

export function createEngines(config: ScribeConfig): Engines {
  return {
    notes: config.llm ? new ChatCompletionsGenerator(config.llm) : new BuiltinNoteGenerator(),
    stt: config.stt ? new TranscriptionEngine(config.stt) : undefined,
  };
}
