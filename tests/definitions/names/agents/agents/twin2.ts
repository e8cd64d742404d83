export default defineAgent({ name: 'twin', sideA: { prompt: 'chat' }, sideB: { human: true } });
