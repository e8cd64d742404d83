import { defineModel } from '@standardagents/spec';

export default defineModel({
  name: 'assistant_demo',
  provider: 'scripted',
  model: 'demo',
  script: [
    { text: 'Hello! I am a scripted assistant: I answer the same way every time.' },
    { text: 'That is all I know.' },
  ],
});
