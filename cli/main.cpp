#include <cstdio>
int main() { std::puts("fusejit: under construction"); return 0; }
