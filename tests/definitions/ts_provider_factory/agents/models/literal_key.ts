import { defineModel } from '@standardagents/spec';
import { openai } from '@standardagents/openai';

export default defineModel({
  name: 'literal_key',
  provider: openai({
    baseUrl: 'http://127.0.0.1:1/v1',
    apiKey: 'sk-live-0123456789abcdef',
  }),
  model: 'gpt-4o-mini',
});
