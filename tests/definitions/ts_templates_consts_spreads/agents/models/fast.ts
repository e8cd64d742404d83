import { defineModel } from '@standardagents/spec';

const MODEL_ID = 'demo';

export default defineModel({
  name: 'fast',
  provider: 'scripted',
  model: MODEL_ID,
  script: [{ text: `hello from ${MODEL_ID}` }],
});
