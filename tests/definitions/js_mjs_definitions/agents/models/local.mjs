import { defineModel, providerEnv } from '@standardagents/spec';
import { openai } from '@standardagents/openai';

export default defineModel({
  name: 'local',
  provider: openai({ baseUrl: 'http://127.0.0.1:1/v1', apiKey: providerEnv('LOCAL_KEY') }),
  model: 'qwen3',
  maxTokens: 512,
});
