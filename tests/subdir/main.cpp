// A program using fusejit through add_subdirectory: build y = relu(x) * 2 and run it on the CPU.
#include <cstdio>

#include <fusejit/fusejit.h>

int main() {
  namespace fj = fusejit;
  fj::GraphBuilder b("subdir");
  fj::Value x = b.input("x", fj::DType::F32, {4});
  b.output("y", b.op("relu", {x}) * 2);
  fj::Options o;
  o.backend = fj::Backend::Cpu;
  fj::Program p = fj::Program::compile(b.build(), o);
  const float in[4] = {-1.0f, 0.5f, 2.0f, -0.0f};
  const fj::HostTensor t = fj::HostTensor::from_floats(fj::DType::F32, {4}, in);
  const std::vector<float> y = p.run({t})[0].to_floats();
  std::printf("add_subdirectory consumer: y = [%g, %g, %g, %g]\n", y[0], y[1], y[2], y[3]);
  return y[0] == 0.0f && y[1] == 1.0f && y[2] == 4.0f ? 0 : 1;
}
