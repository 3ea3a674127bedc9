import { runServiceMain } from '@ironflow/services';

void runServiceMain('dispatcher', ['dispatcher']);
