#!/usr/bin/env python3
"""tests/data/synthetic/frame_words.pickle: one allocation per C++ frame
name that frame tags read (analyze/frames.c frame_tags): the autograd
engine, cuBLAS/cuDNN workspace, gradient accumulation and DDP's buckets,
matmul-like and softmax kernels, with near misses beside them (a part of a
word only). tests/unit/test_frames.c holds the same names, in this order,
with the tags each must and must not have.

    python3 tests/gen/frame_words.py
"""
import pickle

NAMES = [
    "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, "
    "torch::autograd::Node*, torch::autograd::InputBuffer&, "
    "std::shared_ptr<torch::autograd::ReadyQueue> const&)",
    "torch::autograd::engine::dispatch(c10::Device)",
    "torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
    "torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
    "at::cuda::getCUDABlasLtWorkspace()",
    "at::cuda::(anonymous namespace)::setWorkspaceForHandle(cublasContext*, c10::cuda::CUDAStream)",
    "at::cuda::blas::cublasLtWorkspace::cublasLtWorkspace()",
    "at::native::cudnn_convolution_forward_workspace(at::Tensor const&, long)",
    "at::native::cudnn_convolution(at::Tensor const&, at::Tensor const&, c10::ArrayRef<long>)",
    "c10::cuda::CUDACachingAllocator::Native::getWorkspaceBytes(unsigned long)",
    "c10d::Reducer::initialize_buckets(std::vector<c10d::Reducer::Bucket>)",
    "c10d::Reducer::rebuild_buckets()",
    "c10d::Reducer::autograd_hook(unsigned long)",
    "at::native::structured_addmm_out_cuda::impl(at::Tensor const&, at::Tensor const&)",
    "at::native::bmm_out_cuda(at::Tensor const&, at::Tensor const&, at::Tensor&)",
    "mm",
    "c10d::ProcessGroupNCCL::allreduce_impl(std::vector<at::Tensor>&, c10d::AllreduceOptions const&) "
    "comm",
    "at::native::(anonymous namespace)::structured_softmax_cuda_out_functional::"
    "set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>)",
    "at::native::structured__softmax_backward_data_out::impl(at::Tensor const&, long)",
    "at::native::structured__softmax_out_functional::set_output_strided(long)",
    "at::native::_scaled_dot_product_attention_math(at::Tensor const&, at::Tensor const&, "
    "at::Tensor const&, std::optional<at::Tensor> const&, double, bool)",
    "at::native::matmul(at::Tensor const&, at::Tensor const&)",
]


def main():
    trace, addr, t = [], 0x7F0000000000, 1795972022102326
    for name in NAMES:
        trace.append({"action": "alloc", "addr": addr, "size": 512, "stream": 0, "time_us": t,
                      "frames": [{"name": name, "filename": "??", "line": 0}]})
        addr += 512
        t += 10
    with open("tests/data/synthetic/frame_words.pickle", "wb") as f:
        pickle.dump({"segments": [], "device_traces": [trace]}, f, protocol=4)


if __name__ == "__main__":
    main()
