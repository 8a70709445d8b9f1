// placeholder until the first module file lands
