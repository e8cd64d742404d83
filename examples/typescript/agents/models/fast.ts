import { defineModel } from '@standardagents/spec';
import { openai } from '@standardagents/openai';

export default defineModel({
  name: 'fast',
  provider: openai,
  model: 'gpt-4o-mini',
});
