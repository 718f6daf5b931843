/// The start of a Python script driving Debian's Chromium headless through selenium: imports
/// (`sys`, `webdriver`, `By`, `WebDriverWait`) and `driver`, with the browser's console kept
/// (`driver.get_log("browser")`). The script quits the driver itself.
public enum HeadlessChromium {
    public static let prelude = """
        import sys
        from selenium import webdriver
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,900"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path="/usr/bin/chromedriver"), options=options)

        """
}
