const agent = defineAgent({ name: 'x' });
