// .npy reading and writing: round trips, NumPy-written fixtures, and errors naming the field.
#include <gtest/gtest.h>

#include <cstdio>

#include "heddle/frontend/Npy.h"

namespace heddle {
namespace {

std::string data(const std::string& f) {
  return std::string(HEDDLE_SOURCE_DIR) + "/tests/data/" + f;
}

TEST(Npy, RoundTripsFloatIntAndBool) {
  for (DType dt : {DType::kF32, DType::kI64, DType::kBool}) {
    Tensor t(dt, IVec{2, 3});
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.is_int())
        t.i64()[i] = dt == DType::kBool ? i % 2 : i * 1000000007LL;
      else
        t.f32()[i] = 0.5f * static_cast<float>(i) - 1.25f;
    }
    std::string path = ::testing::TempDir() + "heddle_npy_test.npy";
    ASSERT_TRUE(write_npy(path, t).ok());
    auto back = read_npy(path);
    ASSERT_TRUE(back.ok()) << back.error().to_string();
    EXPECT_EQ(*back, t) << dtype_name(dt);
    std::remove(path.c_str());
  }
}

TEST(Npy, RoundTripsScalarAndVector) {
  for (IVec shape : {IVec{}, IVec{5}}) {
    Tensor t(DType::kF32, shape);
    t.fill(3.0);
    const std::string path = ::testing::TempDir() + "heddle_npy_s.npy";
    ASSERT_TRUE(write_npy(path, t).ok());
    auto back = read_npy(path);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, t);
  }
}

TEST(Npy, ReadsNumpyWrittenFiles) {
  auto f = read_npy(data("cnn.in.npy"));
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  EXPECT_EQ(f->shape(), (IVec{4, 3, 32, 32}));
  auto ids = read_npy(data("decoder.in.npy"));
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->dtype(), DType::kI64);
  EXPECT_EQ(ids->shape(), (IVec{4, 8}));
}

TEST(Npy, ReadsInt32AndBoolAndFloat64) {
  auto header = [](const std::string& descr, const std::string& shape) {
    std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    while ((10 + h.size() + 1) % 64) h += ' ';
    h += '\n';
    std::string out = "\x93NUMPY\x01";
    out += '\0';
    out += static_cast<char>(h.size());
    out += '\0';
    return out + h;
  };
  int32_t i32[2] = {-7, 9};
  auto a = parse_npy(header("<i4", "(2,)") + std::string(reinterpret_cast<char*>(i32), 8), "a");
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  EXPECT_EQ(a->i64()[0], -7);
  EXPECT_EQ(a->i64()[1], 9);
  auto b = parse_npy(header("|b1", "(3,)") + std::string("\x01\x00\x01", 3), "b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->dtype(), DType::kBool);
  EXPECT_EQ(b->i64()[1], 0);
  double f64 = 2.5;
  auto c = parse_npy(header("<f8", "()") + std::string(reinterpret_cast<char*>(&f64), 8), "c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->f32()[0], 2.5f);
}

TEST(Npy, ErrorsNameTheFileAndField) {
  auto garbage = parse_npy("hello world, not numpy", "g.npy");
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.error().to_string().find("g.npy"), std::string::npos);
  EXPECT_NE(garbage.error().message.find("magic"), std::string::npos);

  std::string bytes;
  {
    Tensor t(DType::kF32, IVec{4});
    const std::string path = ::testing::TempDir() + "heddle_npy_t.npy";
    ASSERT_TRUE(write_npy(path, t).ok());
    auto r = read_npy(path);
    ASSERT_TRUE(r.ok());
    std::FILE* f = std::fopen(path.c_str(), "rb");
    char buf[256];
    size_t n = std::fread(buf, 1, sizeof buf, f);
    std::fclose(f);
    bytes.assign(buf, n);
  }
  auto truncated = parse_npy(bytes.substr(0, bytes.size() - 3), "t.npy");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.error().message.find("shape"), std::string::npos);
  std::string fortran = bytes;
  fortran.replace(fortran.find("False"), 5, "True ");
  auto ft = parse_npy(fortran, "f.npy");
  ASSERT_FALSE(ft.ok());
  EXPECT_NE(ft.error().message.find("fortran_order"), std::string::npos);
  std::string u8 = bytes;
  u8.replace(u8.find("<f4"), 3, "|u1");
  auto bad = parse_npy(u8, "u.npy");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("descr"), std::string::npos);
  EXPECT_FALSE(read_npy("/nonexistent/x.npy").ok());
}

}  // namespace
}  // namespace heddle
