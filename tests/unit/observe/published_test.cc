// Published: when the owner renders, and what readers get.
#include "observe/published.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace strata::observe {
namespace {

TEST(PublishedTest, NobodyReadingMeansNothingToRender) {
  FakeClock clock;
  Published p(&clock);
  EXPECT_FALSE(p.Wanted());
  clock.Advance(100000);
  EXPECT_FALSE(p.Wanted());
}

TEST(PublishedTest, AWaitingReaderGetsTheNextText) {
  FakeClock clock;
  Published p(&clock);
  std::atomic<bool> done{false};
  std::string got;
  std::thread reader([&] {
    auto t = p.Get();
    got = t.ok() ? *t : std::string(t.status().message());
    done = true;
  });
  for (int i = 0; i < 500 && !p.Wanted(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE(p.Wanted());
  p.Publish("v1");
  reader.join();
  EXPECT_EQ(got, "v1");
  // Fresh enough: served at once, and not wanted until `refresh` passed.
  EXPECT_EQ(*p.Get(), "v1");
  EXPECT_FALSE(p.Wanted());
  clock.Advance(PublishedOptions().refresh_ms);
  EXPECT_TRUE(p.Wanted());  // warm: read recently, text is old
  p.Publish("v2");
  clock.Advance(PublishedOptions().refresh_ms);
  EXPECT_FALSE(p.Wanted());  // nobody read v2 yet: no new render
  EXPECT_EQ(*p.Get(), "v2");
  EXPECT_TRUE(p.Wanted());
  clock.Advance(PublishedOptions().keep_warm_ms + 1);
  EXPECT_FALSE(p.Wanted());  // cold: nobody read for a minute
}

TEST(PublishedTest, AStuckOwnerMakesReadersWaitABoundedTime) {
  FakeClock clock;
  PublishedOptions o;
  o.wait_ms = 50;
  Published p(&clock, o);
  const auto start = std::chrono::steady_clock::now();
  auto t = p.Get();
  EXPECT_TRUE(absl::IsUnavailable(t.status()));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  p.Publish("old");
  clock.Advance(o.max_age_ms + 1);
  t = p.Get();  // stale, nobody renders: the old text after the wait
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "old");
}

// A snapshot's renderer runs on the reader's thread, once per read: the
// owner's loop never pays for (or waits on) writing the text.
TEST(PublishedTest, ASnapshotIsRenderedByItsReader) {
  FakeClock clock;
  Published p(&clock);
  std::atomic<int> renders{0};
  std::thread::id rendered_on;
  p.Publish([&] {
    ++renders;
    rendered_on = std::this_thread::get_id();
    return std::string("lazy");
  });
  EXPECT_EQ(renders, 0);
  std::string got;
  std::thread::id reader_id;
  std::thread reader([&] {
    reader_id = std::this_thread::get_id();
    got = *p.Get();
  });
  reader.join();
  EXPECT_EQ(got, "lazy");
  EXPECT_EQ(renders, 1);
  EXPECT_EQ(rendered_on, reader_id);
}

}  // namespace
}  // namespace strata::observe
