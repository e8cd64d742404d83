import { defineModel } from '@standardagents/spec';
import createOpenAI from '@standardagents/openai';

export default defineModel({
  name: 'unknown_option',
  provider: createOpenAI({ baseUrl: 'http://127.0.0.1:1/v1', organisation: 'acme' }),
  model: 'gpt-4o-mini',
});
